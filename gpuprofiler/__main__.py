from gpuprofiler.cli import main

raise SystemExit(main())
