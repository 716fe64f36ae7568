from hspz.cli import main

raise SystemExit(main())
