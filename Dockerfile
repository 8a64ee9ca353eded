# drkit's image for docker-compose.yml (replicate and monitor services).
FROM python:3.11-slim
WORKDIR /opt/drkit
COPY pyproject.toml README.md ./
COPY drkit ./drkit
COPY migrations ./migrations
COPY runbooks ./runbooks
RUN pip install --no-cache-dir .
ENV DRKIT_STATE_DIR=/var/lib/drkit
ENTRYPOINT ["drkit"]
CMD ["--help"]
