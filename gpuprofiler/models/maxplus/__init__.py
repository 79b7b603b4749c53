"""The max-plus model of a kernel (Antonyuk & Mikheev 2022): algebra (:mod:`.algebra`, :mod:`.symbolic`),
kernel graphs (:mod:`.graph`), the graph builder for real kernel sources (:mod:`.builder`), the four models
(:mod:`.models`), ``--explain`` (:mod:`.explain`), the paper's worked graphs (:mod:`.examples`) and the
model behind the common predictor interface (:mod:`.predictor`)."""
