"""`python -m bootstrap.cli …` runs the same front door as the `groundctl` console script."""

from bootstrap.cli import main

if __name__ == "__main__":
    main()
