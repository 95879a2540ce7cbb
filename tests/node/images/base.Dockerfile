# The Python base of the e2e images, in place of the Dockerfile's default PYTHON_IMAGE
# (python:3.11-slim-bookworm), which no registry here can serve. Its root file system is a
# Debian bookworm made by mmdebstrap from Debian's packages (tests/node/images.py, base_rootfs):
# Python 3.11 with venv, `python` naming python3, pip and setuptools under /usr/local, not
# marked externally managed, CA certificates; documentation, manuals and locales left out as
# in the slim images. The Dockerfile's header says why this is equivalent.
FROM scratch
ADD rootfs.tar /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
CMD ["python3"]
