# One image for every role: Dask scheduler, Dask worker and the trainer.
#
#   docker build -t lancetnic-flow .                                  # CPU (default)
#   docker build -t lancetnic-flow:cuda --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu124 .
#
#   docker run --rm -p 8786:8786 -p 8787:8787 lancetnic-flow dask scheduler
#   docker run --rm lancetnic-flow dask worker tcp://SCHEDULER:8786 --memory-limit 4GiB --nthreads 1
#   docker run --rm -v $PWD:/work -w /work lancetnic-flow \
#       lancetnic-flow train s3://bucket/data/*.parquet --scheduler tcp://SCHEDULER:8786 --cache s3://bucket/cache
FROM python:3.11-slim AS build
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
RUN pip install --index-url ${TORCH_INDEX} "torch==${TORCH_VERSION}"
COPY pyproject.toml README.md /src/
COPY lancetnic_flow /src/lancetnic_flow
RUN pip install "/src[s3,gcs,http]"

FROM python:3.11-slim
COPY --from=build /opt/venv /opt/venv
# What a planned worker runs with (see docs/memory.md): freed memory goes back
# to the OS between tasks; Acero's alignment warning is noise here.
ENV PATH=/opt/venv/bin:$PATH \
    ARROW_DEFAULT_MEMORY_POOL=system \
    MALLOC_TRIM_THRESHOLD_=65536 \
    ACERO_ALIGNMENT_HANDLING=ignore \
    PYTHONUNBUFFERED=1
RUN useradd --create-home --uid 10001 flow
USER flow
WORKDIR /home/flow
EXPOSE 8786 8787
CMD ["lancetnic-flow", "--help"]
