"""`python -m authsvc.cli`: the same as the `authsvc` console script."""

from authsvc.cli import main

main()
