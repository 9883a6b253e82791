# One image for every process of the platform: web (daphne processes, runweb), worker, beat, gRPC sidecar (rungrpc).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 A2A_VAR_DIR=/var/lib/a2a
WORKDIR /app
# The runtime dependencies first, at the versions constraints.txt pins (`make lock`): this layer
# is built again only when pyproject.toml or constraints.txt change, not with every code change.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt -c constraints.txt \
    && rm /tmp/requirements.txt
# The code. Static files are served from the installed apps by the ASGI app itself
# (a2a_platform/asgi.py): no collectstatic.
COPY manage.py ./
COPY a2a_platform ./a2a_platform
COPY agents ./agents
COPY tasks_app ./tasks_app
COPY push_app ./push_app
COPY grpc_server ./grpc_server
COPY console ./console
COPY templates ./templates
RUN pip install --no-deps . && rm -rf build ./*.egg-info \
    && mkdir -p /var/lib/a2a && useradd --system a2a && chown a2a /var/lib/a2a
USER a2a
EXPOSE 8000 50051
CMD ["python", "manage.py", "runweb", "--bind", "0.0.0.0", "--port", "8000"]
