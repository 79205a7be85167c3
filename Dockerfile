# The controller's image: its static binary and the nonroot user on an
# empty base. internal/image builds the same image without a container
# daemon (make image, make release); its TestDockerfileDescribesTheSameImage
# fails when the last stage below differs from what it builds.
FROM golang:1.26 AS build
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X github.com/nats-operator/nats-operator/internal/version.Version=${VERSION} -X github.com/nats-operator/nats-operator/internal/version.Commit=${REVISION}" \
    -o /out/nats-operator ./cmd/nats-operator

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
COPY internal/image/rootfs/etc/group internal/image/rootfs/etc/passwd /etc/
COPY --from=build /out/nats-operator /nats-operator
LABEL org.opencontainers.image.title=nats-operator \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION}
USER 65532:65532
ENTRYPOINT ["/nats-operator"]
