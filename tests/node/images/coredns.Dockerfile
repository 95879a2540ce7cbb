# Cluster DNS: the CoreDNS binary built from its Go module (tools/coredns), as upstream's
# image is a static binary on an empty file system.
FROM scratch
COPY coredns /coredns
USER 65532:65532
EXPOSE 53 53/udp
ENTRYPOINT ["/coredns"]
