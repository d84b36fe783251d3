# syntax=docker/dockerfile:1
# readsync's container image. `make image` builds it with the commit
# stamped in and tags it as --version names the build; by hand, at a
# release commit:
#   docker build --build-arg COMMIT=$(git rev-parse --short=12 HEAD) \
#     -t readsync:$(cat VERSION) .

# The Go of go.mod (TestDockerfileGoVersion in internal/app checks it).
FROM golang:1.26.8 AS build
WORKDIR /src
# Modules first, so that this layer stays cached while only code changes.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The commit: the build sees no .git (.dockerignore), so make stamps it;
# the version is the VERSION file, which the binary embeds.
ARG COMMIT=unknown
# Static (no cgo) for the distroless static image; the -ldflags of
# `make build`, so --version reports the same either way.
RUN CGO_ENABLED=0 go build -trimpath \
        -ldflags "-s -w -X main.commit=${COMMIT}" \
        -o /out/readsync ./cmd/readsync \
    && mkdir -p /out/state/spool

# No shell, no package manager: certificates, time zones and a nonroot user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/readsync /usr/local/bin/readsync
# The spool directory belongs to the runtime user, so that a plain
# `docker run` can spool too; Kubernetes mounts a volume over it.
COPY --from=build --chown=65532:65532 /out/state /var/lib/readsync
ENV READSYNC_SPOOL_DIR=/var/lib/readsync/spool \
    READSYNC_SCHEDULES_FILE=/etc/readsync/schedules.yaml
# Numeric, so that Kubernetes can verify runAsNonRoot.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/readsync"]
