// minirepro: with three plain nats-server processes in a cluster, create an
// R1 consumer from a client connected to one server and pull from it at once,
// the way nats.go's ordered consumer does on every Fetch. When the consumer
// is placed on another server, the pull request sometimes reaches the
// client's server before the consumer's $JS.API.CONSUMER.MSG.NEXT interest
// (RS+ on the account's pooled route), while the create response already
// came over the system account's dedicated route: 503 no responders.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("s", "nats://127.0.0.1:4301", "server the client connects to")
	n := flag.Int("n", 1000, "create-then-pull iterations")
	delay := flag.Duration("delay", 0, "wait this long between the create response and the pull")
	flag.Parse()
	ctx := context.Background()
	nc, err := nats.Connect(*url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) { // JetStream may still be electing its meta leader
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "REPRO", Subjects: []string{"repro"}, Replicas: 3})
		if err == nil {
			break
		} else if time.Since(start) > 30*time.Second {
			log.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "repro", []byte("x")); err != nil {
		log.Fatal(err)
	}
	me := nc.ConnectedServerName()
	remote, remoteFail, local, localFail := 0, 0, 0, 0
	for i := 0; i < *n; i++ {
		name := fmt.Sprintf("c%d_%d", time.Now().UnixNano(), i)
		cons, err := js.CreateOrUpdateConsumer(ctx, "REPRO", jetstream.ConsumerConfig{
			Name: name, AckPolicy: jetstream.AckNonePolicy, Replicas: 1, MemoryStorage: true, InactiveThreshold: time.Minute})
		if err != nil {
			log.Fatal(err)
		}
		host := cons.CachedInfo().Cluster.Leader
		time.Sleep(*delay)
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err == nil {
			for range batch.Messages() {
			}
			err = batch.Error()
		}
		noResp := errors.Is(err, nats.ErrNoResponders)
		if err != nil && !noResp {
			log.Fatal(err)
		}
		if host == me {
			local++
			if noResp {
				localFail++
			}
		} else {
			remote++
			if noResp {
				remoteFail++
			}
		}
		js.DeleteConsumer(ctx, "REPRO", name)
	}
	fmt.Printf("client on %s: no responders on %d of %d pulls to a consumer on another server, %d of %d on its own server\n",
		me, remoteFail, remote, localFail, local)
}
