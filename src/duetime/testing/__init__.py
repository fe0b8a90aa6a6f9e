"""Public test aids: fakes (:mod:`.fakes`) and the store conformance suite (:mod:`.conformance`)."""
