# One image for every process of the platform: web (daphne processes, runweb), worker, beat, gRPC sidecar (rungrpc).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 A2A_VAR_DIR=/var/lib/a2a
# The user every process runs as, and the one directory it writes (beat's schedule file).
RUN useradd --system a2a && mkdir -p /var/lib/a2a && chown a2a /var/lib/a2a
WORKDIR /app
# The runtime dependencies first, at the versions constraints.txt pins (`make lock`): this layer
# is built again only when pyproject.toml or constraints.txt change, not with every code change.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > requirements.txt \
    && pip install -r requirements.txt -c constraints.txt \
    && rm requirements.txt
# The code: the whole build context, which .dockerignore limits to pyproject.toml's packages and
# manage.py (an allowlist, so no secret kept next to docker-compose.yml gets in); pip installs
# the packages that list names, and `python manage.py` runs them from /app. Static files are
# served from the installed apps by the ASGI app itself (a2a_platform/asgi.py): no collectstatic.
COPY . .
RUN pip install --no-deps . && rm -rf build ./*.egg-info
USER a2a
EXPOSE 8000 50051
CMD ["python", "manage.py", "runweb", "--bind", "0.0.0.0", "--port", "8000"]
