"""Every predictor, behind one interface (:mod:`.base`) and one registry (:mod:`.registry`): the fractal
extrapolator fed by small-size sweeps (:mod:`.fractal`), the max-plus model of a kernel's data graph
(:mod:`.maxplus`) and the PTX pipeline simulator (:mod:`.pipeline`)."""
