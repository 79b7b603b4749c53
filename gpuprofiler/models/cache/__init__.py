"""Cache behaviour of a kernel predicted from its address stream (Monakov et al.'s tools: reuse distances and
Hagersten's StatCache): the stream in a modelled execution order (:mod:`.streams`), reuse and exact LRU stack
distances (:mod:`.reuse`), miss-ratio curves from a sparse sample of reuse distances (:mod:`.statcache`)."""
