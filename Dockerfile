# duetime node image: `duetime serve` on PostgreSQL (or SQLite in /var/lib/duetime).
#   docker build -t duetime .
#   docker run -e DUETIME_ADMIN_TOKEN=$(openssl rand -hex 32) \
#              -e DUETIME_DB=postgresql://duetime@db/duetime -p 8080:8080 duetime
# A node listening on 0.0.0.0 refuses to start in dev mode: DUETIME_ADMIN_TOKEN is required.

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY packaging ./packaging
COPY src ./src
# Two wheels from one tree: duetime (the client) and duetime-server (packaging/server, whose
# `src` links to ../../src); naming the local server project makes pip take it from here.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[server]" ./packaging/server

FROM python:3.12-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/duetime --create-home duetime
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "duetime[server]" \
    && rm -rf /wheels
ENV PYTHONUNBUFFERED=1 \
    DUETIME_HOST=0.0.0.0 \
    DUETIME_PORT=8080 \
    DUETIME_DATA_DIR=/var/lib/duetime
WORKDIR /var/lib/duetime
USER duetime
EXPOSE 8080
# /readyz: the store answers and is migrated (a node migrates PostgreSQL itself at start).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["duetime"]
CMD ["serve"]
