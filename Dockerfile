# The image `groundctl fleet manifests` schedules: groundctl, the Pulumi CLI and the provider plugins
# its layers use, run as a non-root user. Everything is pinned, so two runs a month apart are the
# same software: the base image by its exact release, the Pulumi CLI by version and checksum, the
# plugins by version. The versions are groundctl's (bootstrap/engine/versions.py: PULUMI_CLI_PINNED; the
# SDKs are pinned to the plugin versions, since each SDK asks for its own version of its plugin and
# groundctl refuses to run without it; tests/test_preflight.py holds this file to both).
#   docker build --build-arg PULUMI_SHA256=<sha256 of the linux-x64 tarball> -t REGISTRY/groundctl:0.1.0 .
# (the checksum is in the Pulumi release's checksums file; the build refuses to start without it)
FROM python:3.11.11-slim-bookworm

ARG PULUMI_VERSION=3.259.0
ARG PULUMI_SHA256
ARG PULUMI_AWS_VERSION=7.51.1
ARG PULUMI_KUBERNETES_VERSION=4.34.2

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PULUMI_SKIP_UPDATE_CHECK=true \
    PATH=/opt/pulumi/bin:/opt/pulumi/plugins:$PATH

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ADD https://get.pulumi.com/releases/sdk/pulumi-v${PULUMI_VERSION}-linux-x64.tar.gz /tmp/pulumi.tgz
RUN test -n "${PULUMI_SHA256}" || { echo "pass --build-arg PULUMI_SHA256=<sha256 of the tarball>" >&2; exit 1; } \
    && echo "${PULUMI_SHA256}  /tmp/pulumi.tgz" | sha256sum --check --strict - \
    && mkdir -p /opt/pulumi/bin \
    && tar -xzf /tmp/pulumi.tgz -C /opt/pulumi/bin --strip-components=1 \
    && rm /tmp/pulumi.tgz \
    && pulumi version | grep -qx "v${PULUMI_VERSION}"

# Plugins are installed at build time and put on PATH: Pulumi prefers a plugin found on PATH, so a
# pod with a read-only root file system and a scratch PULUMI_HOME never downloads one at run time.
RUN PULUMI_HOME=/opt/pulumi/home pulumi plugin install resource aws "${PULUMI_AWS_VERSION}" \
    && PULUMI_HOME=/opt/pulumi/home pulumi plugin install resource kubernetes "${PULUMI_KUBERNETES_VERSION}" \
    && mkdir -p /opt/pulumi/plugins \
    && ln -s "/opt/pulumi/home/plugins/resource-aws-v${PULUMI_AWS_VERSION}/pulumi-resource-aws" /opt/pulumi/plugins/ \
    && ln -s "/opt/pulumi/home/plugins/resource-kubernetes-v${PULUMI_KUBERNETES_VERSION}/pulumi-resource-kubernetes" \
        /opt/pulumi/plugins/

COPY pyproject.toml README.md /src/
COPY groundctl /src/groundctl
COPY bootstrap /src/bootstrap
COPY recovery /src/recovery
COPY stacks /src/stacks
RUN pip install --no-cache-dir /src "pulumi-aws==${PULUMI_AWS_VERSION}" \
        "pulumi-kubernetes==${PULUMI_KUBERNETES_VERSION}" \
    && groupadd --gid 10001 groundctl \
    && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin groundctl \
    && mkdir -p /work/environments

# The CronJobs mount the specs at /work/environments and a scratch volume at /tmp (HOME, PULUMI_HOME).
WORKDIR /work
USER 10001:10001
ENTRYPOINT ["groundctl"]
CMD ["--help"]
