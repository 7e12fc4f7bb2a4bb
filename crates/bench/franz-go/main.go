// franz-peer: the franz-go side of mck-bench. It reads one topic from its first
// offsets with direct partition assignment (no group), writes each record's value
// and a newline to a buffered stdout (as `mck consume --format value` does), and
// exits once it has read as many records as it was told the topic holds. Several
// clusters (bootstrap lists separated by ';') are read by one client each, all
// writing to the one stdout.
//
//	franz-peer -b 127.0.0.1:9092 -t topic -n 1000000
//	franz-peer -b '127.0.0.1:9092;127.0.0.1:9093' -t topic -n 2000000
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("b", "127.0.0.1:9092", "bootstrap servers, comma separated; clusters separated by ';'")
	topic := flag.String("t", "", "the topic to read")
	want := flag.Int64("n", 0, "records to read, over every cluster, before exiting")
	flag.Parse()
	if *topic == "" || *want <= 0 {
		fmt.Fprintln(os.Stderr, "franz-peer: -t and -n are required")
		os.Exit(2)
	}

	var clients []*kgo.Client
	for _, cluster := range strings.Split(*brokers, ";") {
		client, err := kgo.NewClient(
			kgo.SeedBrokers(strings.Split(cluster, ",")...),
			kgo.ConsumeTopics(*topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		)
		if err != nil {
			fmt.Fprintln(os.Stderr, "franz-peer:", err)
			os.Exit(1)
		}
		defer client.Close()
		clients = append(clients, client)
	}

	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu     sync.Mutex
		read   int64
		failed error
		wg     sync.WaitGroup
	)
	for _, client := range clients {
		wg.Add(1)
		go func(client *kgo.Client) {
			defer wg.Done()
			for {
				fetches := client.PollFetches(ctx)
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				if errs := fetches.Errors(); len(errs) > 0 && !errors.Is(errs[0].Err, context.Canceled) {
					failed = errs[0].Err
					mu.Unlock()
					cancel()
					return
				}
				fetches.EachRecord(func(r *kgo.Record) {
					out.Write(r.Value)
					out.WriteByte('\n')
					read++
				})
				done := read >= *want
				mu.Unlock()
				if done {
					cancel()
					return
				}
			}
		}(client)
	}
	wg.Wait()
	if failed != nil {
		fmt.Fprintln(os.Stderr, "franz-peer:", failed)
		os.Exit(1)
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "franz-peer:", err)
		os.Exit(1)
	}
}
