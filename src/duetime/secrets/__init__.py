"""Credentials at rest: the key ring that seals and opens them (:mod:`.keyring`) and the text of
a sealed value, with how it is shown (:mod:`.sealed`).

What is sealed where (target headers, URL passwords and tokens, credential query parameters, named
credentials) is the delivery layer's business (:mod:`duetime.delivery.sealing`); this package
knows values, not targets. :mod:`.sealed` needs no key and no ``cryptography``: history exports
and every answer redact with it.
"""
