# The image `groundctl fleet manifests` schedules: groundctl, the Pulumi CLI and the provider plugins
# its layers use, run as a non-root user. Everything is pinned, so two runs a month apart are the
# same software: the base image by digest; groundctl's Python dependencies by requirements/image.txt,
# each package by version and sha256 (compiled from pyproject.toml's pins); the Pulumi CLI and the
# plugins by version and sha256. The versions and digests are groundctl's versions table's
# (bootstrap/engine/versions.py); tests/test_pins.py holds this file to it and to the requirements.
#   docker build -t REGISTRY/groundctl:0.1.0 .
# linux/amd64 only: the digests are those of the linux-amd64 release files. A slot that still says
# not-recorded stops the build before anything is downloaded (the base image's, at FROM: "invalid
# reference format" naming it); docs/maintaining.md ("Bumping a Pulumi version") says where each value comes from.
ARG BASE_IMAGE_DIGEST=not-recorded
FROM python:3.11.11-slim-bookworm@${BASE_IMAGE_DIGEST}

ARG PULUMI_VERSION=3.259.0
ARG PULUMI_SHA256=not-recorded
ARG PULUMI_AWS_VERSION=7.51.1
ARG PULUMI_AWS_SHA256=not-recorded
ARG PULUMI_KUBERNETES_VERSION=4.34.2
ARG PULUMI_KUBERNETES_SHA256=not-recorded

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PULUMI_SKIP_UPDATE_CHECK=true \
    PATH=/opt/pulumi/bin:/opt/pulumi/plugins:$PATH

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Nothing is fetched unchecked: every digest this build checks is recorded, or the build stops here.
RUN for slot in PULUMI_SHA256 PULUMI_AWS_SHA256 PULUMI_KUBERNETES_SHA256; do \
        [[ "${!slot}" =~ ^[0-9a-f]{64}$ ]] || { echo "${slot} is '${!slot}', not a sha256: record it in" \
            "bootstrap/engine/versions.py and here (docs/maintaining.md: Bumping a Pulumi version)" >&2; exit 1; }; \
    done

ADD https://get.pulumi.com/releases/sdk/pulumi-v${PULUMI_VERSION}-linux-x64.tar.gz /tmp/pulumi.tgz
RUN echo "${PULUMI_SHA256}  /tmp/pulumi.tgz" | sha256sum --check --strict - \
    && mkdir -p /opt/pulumi/bin \
    && tar -xzf /tmp/pulumi.tgz -C /opt/pulumi/bin --strip-components=1 \
    && rm /tmp/pulumi.tgz \
    && pulumi version | grep -qx "v${PULUMI_VERSION}"

# Plugins are installed at build time, each download checked against its sha256 (--checksum), and put on
# PATH: Pulumi prefers a plugin found on PATH, so a pod with a read-only root file system and a scratch
# PULUMI_HOME never downloads one at run time.
RUN PULUMI_HOME=/opt/pulumi/home pulumi plugin install resource aws "v${PULUMI_AWS_VERSION}" --exact \
        --checksum "${PULUMI_AWS_SHA256}" \
    && PULUMI_HOME=/opt/pulumi/home pulumi plugin install resource kubernetes "v${PULUMI_KUBERNETES_VERSION}" --exact \
        --checksum "${PULUMI_KUBERNETES_SHA256}" \
    && mkdir -p /opt/pulumi/plugins \
    && ln -s "/opt/pulumi/home/plugins/resource-aws-v${PULUMI_AWS_VERSION}/pulumi-resource-aws" /opt/pulumi/plugins/ \
    && ln -s "/opt/pulumi/home/plugins/resource-kubernetes-v${PULUMI_KUBERNETES_VERSION}/pulumi-resource-kubernetes" \
        /opt/pulumi/plugins/

# groundctl's dependencies, every file checked against its sha256; then groundctl itself, with nothing
# resolved or downloaded (the file above installed everything it needs, its build backend too).
COPY requirements/image.txt /src/requirements/image.txt
RUN pip install --no-cache-dir --require-hashes -r /src/requirements/image.txt
COPY pyproject.toml README.md /src/
COPY groundctl /src/groundctl
COPY bootstrap /src/bootstrap
COPY recovery /src/recovery
COPY stacks /src/stacks
RUN pip install --no-cache-dir --no-deps --no-build-isolation --no-index /src \
    && pip check \
    && groupadd --gid 10001 groundctl \
    && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin groundctl \
    && mkdir -p /work/environments

# The CronJobs mount the specs at /work/environments and a scratch volume at /tmp (HOME, PULUMI_HOME).
WORKDIR /work
USER 10001:10001
ENTRYPOINT ["groundctl"]
CMD ["--help"]
