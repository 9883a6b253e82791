# One image for every process of the platform: web (daphne processes, runweb), worker, beat, gRPC sidecar (rungrpc).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 A2A_VAR_DIR=/var/lib/a2a
WORKDIR /app
COPY pyproject.toml ./
COPY a2a_platform ./a2a_platform
COPY agents ./agents
COPY tasks_app ./tasks_app
COPY push_app ./push_app
COPY grpc_server ./grpc_server
COPY console ./console
COPY manage.py ./
RUN pip install --no-cache-dir . && mkdir -p /var/lib/a2a && useradd --system a2a \
    && chown a2a /var/lib/a2a
USER a2a
EXPOSE 8000 50051
CMD ["python", "manage.py", "runweb", "--bind", "0.0.0.0", "--port", "8000"]
