# Convenience targets; every one is a plain go or docker command you can run yourself.
IMAGE ?= imslab/quasipool:latest

.PHONY: test test-fast test-lab test-full lab-image compose compose-check up down scenario bench results

# The packages that hold lab specs (labels e2e, netns, docker, cgroup: internal/testtier).
LAB_PKGS = $(shell grep -rlE --include='*_test.go' 'Label\([^)]*"(e2e|netns|docker|cgroup)"' . | xargs -n1 dirname | sort -u)
# tier NAME CMD: run CMD and print the tier's time, keeping CMD's exit status.
tier = start=$$(date +%s); $(2); rc=$$?; echo "tier $(1): $$(( $$(date +%s) - start )) s (exit $$rc)"; exit $$rc

test:            ## what CI runs: the in-process tier, then the lab tier, each with its time
	@$(MAKE) --no-print-directory test-fast
	@$(MAKE) --no-print-directory test-lab

test-fast:       ## in-process tier: unit and integration specs (fake peers) with -race, packages in parallel
	@$(call tier,fast,go test -race -count=1 -timeout 20m ./...)

test-lab:        ## lab tier: real labs (local, namespaces, compose) one package at a time, nodes built once
	@$(call tier,lab,bin=$$(go run ./cmd/imslab build) && race=$$(go run ./cmd/imslab build --race) && \
	  IMSLAB_TIER=lab IMSLAB_BIN_DIR=$$bin IMSLAB_RACE_BIN_DIR=$$race go test -count=1 -p 1 -timeout 40m $(LAB_PKGS))

test-full:       ## every spec: the whole matrix of scenarios and backends, comparisons, bench smoke, docs
	@$(call tier,full,bin=$$(go run ./cmd/imslab build) && race=$$(go run ./cmd/imslab build --race) && \
	  IMSLAB_TIER=full IMSLAB_BIN_DIR=$$bin IMSLAB_RACE_BIN_DIR=$$race go test -count=1 -p 1 -timeout 150m ./...)

lab-image:       ## the lab image from static binaries built here, FROM scratch: works offline
	go run ./cmd/imslab image --tag $(IMAGE)

compose:         ## regenerate docker-compose.yml and deploy/compose/ from topologies/default.yaml
	go run ./cmd/imslab compose

compose-check:   ## fail when docker-compose.yml or deploy/compose/ are stale
	go run ./cmd/imslab compose --check

up: lab-image    ## the compose lab in the background, every service healthy
	docker compose up -d --wait

down:            ## stop and remove the compose lab and its data volume
	docker compose down -v

scenario:        ## a scenario against a fresh compose lab: make scenario S=scenarios/pcscf-kill.yaml
	go run ./cmd/imslab run --backend compose $(or $(S),scenarios/pcscf-kill.yaml)

bench:           ## issue 13's bench in one run: proxy vs Kamailio, capacity, registration, memory (docs/performance.md)
	go run ./cmd/imslab bench $(ARGS)

results:         ## regenerate docs/results.md's study sections and claims from the committed runs (nothing is run)
	go run ./cmd/imslab results all
