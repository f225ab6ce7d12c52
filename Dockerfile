# The lab image: every binary of the testbed, statically linked, on an empty base.
#
# With network access:  docker build -t imslab/quasipool .
# Offline (no base image can be pulled): make lab-image builds the same binaries on the host and an image
# FROM scratch from them (cmd/imslab image, internal/harness/compose/image.go).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/bin/ \
      ./cmd/bac ./cmd/dnsd ./cmd/hss ./cmd/icscf ./cmd/imslab ./cmd/pcscf ./cmd/scscf ./cmd/ue

FROM scratch
COPY --from=build /out/bin/ /bin/
VOLUME ["/data"]
WORKDIR /data
CMD ["/bin/imslab", "--help"]
