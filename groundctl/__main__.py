"""`python -m groundctl …` runs the same front door as the `groundctl` console script."""

from groundctl import main

if __name__ == "__main__":
    main()
