from kcoral.cli import main

raise SystemExit(main())
