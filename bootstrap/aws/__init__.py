"""The AWS side: clients with one retry policy, the state backend bootstrap, the object store over S3,
and the embedded emulator."""
