"""Keyed flow control's pure rules (SPEC §7 "Keyed flow control"): the key expression language
(:mod:`.keys`), the rules a queue or a task states and their JSON (:mod:`.rules`), and the
timing a create's throttle and debounce decide (:mod:`.timing`). No I/O, no clock: the life
cycle evaluates keys at create time, the store applies what it decided."""
