"""Public test aids: run handlers in-process (:func:`run_handler`, :func:`make_job`, from
:mod:`.handlers`, SDK only), fakes (:mod:`.fakes`) and the store conformance suite
(:mod:`.conformance`, needs ``duetime[server]``)."""

from duetime.testing.handlers import HandlerOutcome, make_job, run_handler, run_handler_async

__all__ = ["HandlerOutcome", "make_job", "run_handler", "run_handler_async"]
