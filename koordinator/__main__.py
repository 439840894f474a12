from koordinator.cli import main

raise SystemExit(main())
