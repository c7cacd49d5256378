"""What the shipped CI workflows decide, as pure functions: which environments a change touches, the
workflow files `groundctl ci init` writes, the sticky plan comment that fits GitHub's limit, and the
job summary and drift issue bodies. The CLI (groundctl/ci.py) does the reading and writing."""
