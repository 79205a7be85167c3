# Static, non-root image of the controller.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/nats-operator ./cmd/nats-operator

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/nats-operator /nats-operator
USER 65532:65532
ENTRYPOINT ["/nats-operator"]
