# drkit's image for docker-compose.yml (replicate and monitor services).
# BASE: an image with Python 3.11+ and its venv module - the public slim image by default;
# where no registry is reachable, scripts/debian-base-image builds one from Debian packages:
#   docker build --build-arg BASE=$(scripts/debian-base-image) -t drkit .
ARG BASE=python:3.11-slim
FROM ${BASE}
WORKDIR /opt/drkit
COPY pyproject.toml README.md constraints.txt ./
COPY drkit ./drkit
COPY migrations ./migrations
COPY runbooks ./runbooks
# A virtualenv: Debian's own python3 refuses system-wide pip installs (PEP 668).
RUN python3 -m venv /opt/drkit/venv \
    && /opt/drkit/venv/bin/pip install --no-cache-dir -c constraints.txt . \
    && useradd --system --uid 10001 --home-dir /var/lib/drkit --create-home drkit
ENV PATH=/opt/drkit/venv/bin:$PATH DRKIT_STATE_DIR=/var/lib/drkit
# Never root: the state dir (SQLite store, generated config) is the drkit user's home.
USER drkit
ENTRYPOINT ["drkit"]
CMD ["--help"]
