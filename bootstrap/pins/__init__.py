"""The adopter's lock of checked release artifacts (groundctl-pins.json at the repository's root): what groundctl
installs (the Pulumi CLI, the provider plugins, Flux's install.yaml, the image's base), each with the sha256 its
publisher recorded, written by `groundctl pins update` and read by every install.

Floors: artifacts (names and URLs) and lockfile (the file, its check) are pure; checksums parses a publisher's
file; fetch and registry read the network; update and install combine them over fetchers passed in.
"""
