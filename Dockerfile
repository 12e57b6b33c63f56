# checkpoint-runtime image: `checkpoint-runtime run` as UID 10001 (the chart's runAsUser), on a
# read-only root filesystem. Writes go only to /tmp and the checkpoint volume (both mounted by
# the chart); bytecode is compiled at build time and never written at run time.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# s3fs gives the object-store collector s3:// URLs; set EXTRAS="" for local folders only.
ARG EXTRAS=s3
COPY pyproject.toml README.md ./
COPY src ./src
# The package data (src/checkpoint_runtime/data/*) are symlinks to these folders.
COPY schemas ./schemas
COPY charts/checkpoint-runtime ./charts/checkpoint-runtime
COPY policy ./policy
COPY ci ./ci
# Dependencies from the image's lock, each by its SHA-256 (requirements.lock without extras,
# requirements-s3.lock with s3); then the project itself, with nothing resolved beside it.
COPY scripts/image/requirements.lock scripts/image/requirements-s3.lock ./locks/
# The venv holds no pip or setuptools (the runtime loads neither): the base image's pip installs
# into it.
RUN python -m venv --without-pip /opt/venv \
    && python -m pip --python /opt/venv/bin/python install --require-hashes --no-deps \
        -r "locks/requirements${EXTRAS:+-${EXTRAS}}.lock" \
    && python -m pip --python /opt/venv/bin/python install --no-deps ".${EXTRAS:+[${EXTRAS}]}"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="checkpoint-runtime" \
      org.opencontainers.image.description="Collector runtime with sharded gzip ConfigMap checkpoints" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=build /opt/venv /opt/venv
# The base image ships the standard library without bytecode; compile it now, since the
# read-only root filesystem will not let the interpreter cache it later.
RUN python -m compileall -q /usr/local/lib/python3.11 /opt/venv/lib
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080
# The chart passes ["run", "--config", "/etc/checkpoint-runtime/config.json"] as args; without
# args the image runs `checkpoint-runtime run` on the embedded file store (/tmp/checkpoints).
ENTRYPOINT ["checkpoint-runtime"]
CMD ["run"]
