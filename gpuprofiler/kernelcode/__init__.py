"""The kernel's code as data: its source parsed (:mod:`.source`), its indices as affine forms in the thread ids
(:mod:`.index`), the work-items it is followed at (:mod:`.sample`), its symbolic execution (:mod:`.interpret`) and
the accesses a launch makes (:mod:`.trace`). The buffer-bounds check and the max-plus graph builder read the code
through this one front end."""
