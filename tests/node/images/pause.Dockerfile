# The pod sandbox image: upstream's pause program (k8s.io/kubernetes build/pause/linux/pause.c,
# compiled statically by tests/node/binaries.py), as registry.k8s.io/pause is built.
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
