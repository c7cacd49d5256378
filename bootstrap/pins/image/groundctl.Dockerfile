# The image `groundctl fleet manifests` schedules, written into this repository by `groundctl pins dockerfile`:
# groundctl, the Pulumi CLI and the provider plugins its layers use, run as a non-root user. Everything is
# pinned, so two runs a month apart are the same software: the base image by the digest the pins lock records;
# groundctl and its Python dependencies by this repository's hashed requirements file (@REQUIREMENTS@), whose
# groundctl wheel is the one committed here; the Pulumi CLI and the plugins by the pins lock (groundctl-pins.json,
# written by `groundctl pins update`), each download checked against the sha256 it records before anything is
# installed. Build it at the repository's root, with the base image's digest from the lock:
#   docker build -f groundctl.Dockerfile --build-arg BASE_IMAGE_DIGEST="$(groundctl pins base-image)" \
#     -t REGISTRY/groundctl:TAG .
# linux/amd64 only (the lock's default platform). Without the digest the build stops at FROM ("invalid
# reference format"); a lock that lacks anything stops it at the RUN after the lock, naming the command to run.
# Write it again with `groundctl pins dockerfile --force` after upgrading groundctl; do not edit it by hand.
ARG BASE_IMAGE_DIGEST=not-recorded
FROM @BASE_IMAGE@@${BASE_IMAGE_DIGEST}
ARG BASE_IMAGE_DIGEST

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PULUMI_SKIP_UPDATE_CHECK=true \
    PATH=/opt/pulumi/bin:/opt/pulumi/plugins:$PATH

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# groundctl and its dependencies, every file checked against its sha256, as the workflows install them (a
# `file:` URL pip-compile wrote on another machine pointed at the wheel committed here: the same bytes).
WORKDIR /src
COPY @REQUIREMENTS@ /src/@REQUIREMENTS@
@COPY_WHEEL@
RUN GROUNDCTL_INSTALL=@REQUIREMENTS@ \
    && @INSTALL@ \
    && python -m pip check \
    && groupadd --gid 10001 groundctl \
    && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin groundctl \
    && mkdir -p /work/environments

# The lock and the specs (their Flux versions), then the check: the lock covers what this groundctl, its SDKs
# and the specs need, and its base image digest is the one this build started from.
COPY groundctl-pins.json /src/groundctl-pins.json
COPY environments /src/environments
RUN groundctl pins check --dir /src --image \
    && locked="$(groundctl pins base-image --dir /src)" \
    && { [ "${locked}" = "${BASE_IMAGE_DIGEST}" ] || { echo "BASE_IMAGE_DIGEST is ${BASE_IMAGE_DIGEST}, not the" \
        "lock's ${locked}: build with --build-arg BASE_IMAGE_DIGEST=\"\$(groundctl pins base-image)\"" >&2; exit 1; }; }

# The CLI and the plugins from the lock, each download's sha256 checked before it is unpacked or handed to
# `pulumi plugin install --file`; the plugins put on PATH: Pulumi prefers a plugin found on PATH, so a pod
# with a read-only root file system and a scratch PULUMI_HOME never downloads one at run time.
RUN groundctl pins install --dir /src --platform linux-amd64 --cli /opt/pulumi/bin \
    && pulumi version \
    && PULUMI_HOME=/opt/pulumi/home groundctl pins install --dir /src --platform linux-amd64 --plugins \
    && mkdir -p /opt/pulumi/plugins \
    && ln -s /opt/pulumi/home/plugins/resource-*/pulumi-resource-* /opt/pulumi/plugins/

# The CronJobs mount the specs at /work/environments and a scratch volume at /tmp (HOME, PULUMI_HOME).
WORKDIR /work
USER 10001:10001
ENTRYPOINT ["groundctl"]
CMD ["--help"]
