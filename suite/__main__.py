"""`python -m suite`: see suite.cli."""

from suite.cli import main

if __name__ == "__main__":
    main()
