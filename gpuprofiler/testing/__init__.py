"""Performance tests of GPU kernels in pytest: the plugin (:mod:`.plugin`, loaded through the ``pytest11`` entry
point), the session's measurements and budgets (:mod:`.session`), saved baselines (:mod:`.baseline`) and the
regression test (:mod:`.decide`). Importing this package imports none of them."""
