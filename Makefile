# Convenience targets; every one is a plain go or docker command you can run yourself.
IMAGE ?= imslab/quasipool:latest

.PHONY: test lab-image compose compose-check up down scenario bench results

test:            ## the test suite (what .ci/run runs)
	go test -race -p 1 ./...

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
