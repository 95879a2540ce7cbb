"""The real node: kubelet, containerd, CNI, CoreDNS and the images, for the e2e tier."""
