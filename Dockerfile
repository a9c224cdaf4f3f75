# One image for every role: Dask scheduler, Dask worker and the trainer.
#
#   docker build -t lancetnic-flow .                                  # CPU (default)
#   docker build -t lancetnic-flow:cuda --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu124 .
#
#   docker run --rm -p 8786:8786 -p 8787:8787 lancetnic-flow dask scheduler
#   docker run --rm lancetnic-flow dask worker tcp://SCHEDULER:8786 --memory-limit 4GiB --nthreads 1
#   docker run --rm -v $PWD:/work -w /work lancetnic-flow \
#       lancetnic-flow train s3://bucket/data/*.parquet --scheduler tcp://SCHEDULER:8786 --cache s3://bucket/cache
#
# Offline or without Docker Hub (what scripts/check_image.sh does with podman):
# any base image with python3 3.11 and python3-venv works, and torch can come
# from a local wheel directory mounted into the build:
#
#   podman build -t lancetnic-flow --build-arg BASE_IMAGE=localhost/bookworm-python:3.11 \
#       --build-arg TORCH_INDEX=https://pypi.org/simple --build-arg TORCH_VERSION=2.13.0+cpu \
#       --build-arg PIP_FIND_LINKS=/wheels -v /opt/wheels:/wheels:ro .
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0
# A directory of wheels mounted into the build, searched as well as the
# indexes (pip reads PIP_FIND_LINKS from the environment; empty = none).
ARG PIP_FIND_LINKS=
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
RUN pip install --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}"
COPY pyproject.toml /src/
# The dependencies get their own layer (installed for a stub package, which
# goes again): a change to the code or the README rebuilds from the next COPY.
RUN mkdir /src/lancetnic_flow && touch /src/README.md /src/lancetnic_flow/__init__.py \
 && pip install "/src[s3,gcs,http]" && pip uninstall -y lancetnic_flow \
 && rm -rf /src/lancetnic_flow /src/README.md /src/build /src/*.egg-info
COPY README.md /src/
COPY lancetnic_flow /src/lancetnic_flow
RUN pip install --no-deps /src && pip check
# The featurisation kernels, compiled once here into a cache user flow can read:
# without it every worker would compile them (seconds) at its first task.
ENV NUMBA_CACHE_DIR=/opt/numba-cache
RUN python3 -c "from lancetnic_flow.features import kernels; kernels.warm()" && chmod -R a+rX /opt/numba-cache
# Nothing here builds C++ extensions or runs torch's own C++ tests: drop the
# headers and the test binaries (about 180 MB of the CPU wheel). The .pyc
# files stay: user flow cannot write them, and without them every process
# (worker, trainer) starts about 4 s slower.
RUN torch_dir=$(python3 -c "import os, torch; print(os.path.dirname(torch.__file__))") \
 && rm -rf "$torch_dir/include" "$torch_dir/test" \
 && if [ -d "$torch_dir/bin" ]; then \
        find "$torch_dir/bin" -maxdepth 1 -type f \( -name 'test_*' -o -name '*Test' \) -delete; fi

FROM ${BASE_IMAGE}
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/numba-cache /opt/numba-cache
# What a planned worker runs with (see docs/memory.md): freed memory goes back
# to the OS between tasks; Acero's alignment warning is noise here.
ENV PATH=/opt/venv/bin:$PATH \
    NUMBA_CACHE_DIR=/opt/numba-cache \
    ARROW_DEFAULT_MEMORY_POOL=system \
    MALLOC_TRIM_THRESHOLD_=33554432 \
    MALLOC_MMAP_THRESHOLD_=33554432 \
    ACERO_ALIGNMENT_HANDLING=ignore \
    PYTHONUNBUFFERED=1
RUN useradd --create-home --uid 10001 flow
USER flow
WORKDIR /home/flow
EXPOSE 8786 8787
CMD ["lancetnic-flow", "--help"]
