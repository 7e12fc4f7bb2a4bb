// franz-peer: the franz-go side of mck-bench. It reads one topic from its first
// offsets with direct partition assignment (no group), writes each record's value
// and a newline to a buffered stdout (as `mck consume --format value` does), and
// exits once it has read as many records as it was told the topic holds.
//
//	franz-peer -b 127.0.0.1:9092 -t topic -n 1000000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("b", "127.0.0.1:9092", "bootstrap servers, comma separated")
	topic := flag.String("t", "", "the topic to read")
	want := flag.Int64("n", 0, "records to read before exiting")
	flag.Parse()
	if *topic == "" || *want <= 0 {
		fmt.Fprintln(os.Stderr, "franz-peer: -t and -n are required")
		os.Exit(2)
	}

	client, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "franz-peer:", err)
		os.Exit(1)
	}
	defer client.Close()

	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	var read int64
	for read < *want {
		fetches := client.PollFetches(context.Background())
		if errs := fetches.Errors(); len(errs) > 0 {
			fmt.Fprintln(os.Stderr, "franz-peer:", errs[0].Err)
			os.Exit(1)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			out.Write(r.Value)
			out.WriteByte('\n')
			read++
		})
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "franz-peer:", err)
		os.Exit(1)
	}
}
