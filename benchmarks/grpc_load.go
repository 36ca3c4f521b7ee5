// grpc_load: a fast gRPC load generator for the MessagingService port (issue 33).
//
// The Python grpcio generators (benchmarks/grpc_send.py) saturate their own core near the server's
// rate, so they cannot say how much of a gRPC call's cost is the server's. This one sends request
// bytes serialized beforehand (by benchmarks/grpc_load.py with the server's own v2 stubs) through
// grpc-go with a codec that passes bytes as they are, so the client's cost per call is grpc-go's
// framing and nothing else. Built by grpc_load.py into a temporary directory at run time:
//
//	GOPATH=/usr/share/gocode GO111MODULE=off go build -o DIR/grpc_load benchmarks/grpc_load.go
//
// Modes:
//
//	send     SendMessage, one request from the file per call, round robin; a call whose
//	         response status is not OK counts as an error.
//	receive  a SimpleConsumer's loop: ReceiveMessage (the file's first request), then the receipt
//	         handles of the messages it gave acknowledged, one AckMessage per message (-ack each)
//	         or one for all of them (-ack batch), a receive that found nothing counted apart; the AckMessageRequest is the -ack-prefix file's
//	         bytes (its group and topic) followed by one entry per message.
//
// Printed on exit: one JSON object, per kind of call its count, calls/s, p50 and p99 in ms, and the
// errors, counted over -seconds after -warmup uncounted seconds.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/ioutil"
	"os"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
)

const service = "/apache.rocketmq.v2.MessagingService/"

// Status codes of apache.rocketmq.v2.Code the loop tells apart.
const (
	codeOK              = 20000
	codeMessageNotFound = 40401
)

// rawCodec hands grpc-go the bytes it is given and gives back the bytes received: no (de)serializing
// on the client. Its name is "proto" so the content type is the one every gRPC server expects.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }

func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// readFrames reads a file of requests, each a 4-byte big-endian length then that many bytes.
func readFrames(path string) ([][]byte, error) {
	data, err := ioutil.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var frames [][]byte
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, fmt.Errorf("%s: a cut length", path)
		}
		n := int(binary.BigEndian.Uint32(data))
		if len(data) < 4+n {
			return nil, fmt.Errorf("%s: a cut request", path)
		}
		frames = append(frames, data[4:4+n])
		data = data[4+n:]
	}
	if len(frames) == 0 {
		return nil, fmt.Errorf("%s: no request", path)
	}
	return frames, nil
}

// field returns the bytes of the first length-delimited field num of a message, or nil.
func field(msg []byte, num protowire.Number) []byte {
	for len(msg) > 0 {
		n, typ, size := protowire.ConsumeTag(msg)
		if size < 0 {
			return nil
		}
		msg = msg[size:]
		if n == num && typ == protowire.BytesType {
			v, size := protowire.ConsumeBytes(msg)
			if size < 0 {
				return nil
			}
			return v
		}
		size = protowire.ConsumeFieldValue(n, typ, msg)
		if size < 0 {
			return nil
		}
		msg = msg[size:]
	}
	return nil
}

// statusCode is the code of a response's Status (field 1; code is its field 1), 0 when absent.
func statusCode(response []byte) uint64 {
	status := field(response, 1)
	for len(status) > 0 {
		n, typ, size := protowire.ConsumeTag(status)
		if size < 0 {
			return 0
		}
		status = status[size:]
		if n == 1 && typ == protowire.VarintType {
			v, _ := protowire.ConsumeVarint(status)
			return v
		}
		size = protowire.ConsumeFieldValue(n, typ, status)
		if size < 0 {
			return 0
		}
		status = status[size:]
	}
	return 0
}

// recorder keeps one goroutine's latencies per kind of call, and its errors.
type recorder struct {
	counted  time.Time
	took     map[string][]time.Duration
	errors   map[string]int
	messages int
	empty    int
}

func newRecorder(counted time.Time) *recorder {
	return &recorder{counted: counted, took: map[string][]time.Duration{}, errors: map[string]int{}}
}

func (r *recorder) add(kind string, started time.Time, ok bool) {
	if started.Before(r.counted) {
		return
	}
	if !ok {
		r.errors[kind]++
		return
	}
	r.took[kind] = append(r.took[kind], time.Since(started))
}

type options struct {
	mode, ack string
	requests  [][]byte
	ackPrefix []byte
	timeout   time.Duration
}

func sendLoop(ctx context.Context, cc *grpc.ClientConn, o *options, worker int, stop time.Time, r *recorder) error {
	var response []byte
	for i := worker; time.Now().Before(stop); i++ {
		request := o.requests[i%len(o.requests)]
		started := time.Now()
		call, cancel := context.WithTimeout(ctx, o.timeout)
		err := cc.Invoke(call, service+"SendMessage", &request, &response)
		cancel()
		if err != nil {
			return err
		}
		r.add("send", started, statusCode(response) == codeOK)
	}
	return nil
}

var receiveDesc = &grpc.StreamDesc{StreamName: "ReceiveMessage", ServerStreams: true}

// receiveOnce is one ReceiveMessage: the (message id, receipt handle) of each message it gave.
func receiveOnce(ctx context.Context, cc *grpc.ClientConn, o *options) ([][2][]byte, bool, error) {
	call, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	stream, err := cc.NewStream(call, receiveDesc, service+"ReceiveMessage")
	if err != nil {
		return nil, false, err
	}
	request := o.requests[0]
	if err := stream.SendMsg(&request); err != nil {
		return nil, false, err
	}
	if err := stream.CloseSend(); err != nil {
		return nil, false, err
	}
	var got [][2][]byte
	ok := true
	for {
		var response []byte
		err := stream.RecvMsg(&response)
		if errors.Is(err, io.EOF) {
			return got, ok, nil
		}
		if err != nil {
			return nil, false, err
		}
		if field(response, 1) != nil {
			code := statusCode(response)
			ok = ok && (code == codeOK || code == codeMessageNotFound)
			continue
		}
		if message := field(response, 2); message != nil {
			properties := field(message, 3)
			got = append(got, [2][]byte{field(properties, 3), field(properties, 12)})
		}
	}
}

func ackOnce(ctx context.Context, cc *grpc.ClientConn, o *options, entries [][2][]byte) (bool, error) {
	request := append([]byte(nil), o.ackPrefix...)
	for _, e := range entries {
		var entry []byte
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendBytes(entry, e[0])
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, e[1])
		request = protowire.AppendTag(request, 3, protowire.BytesType)
		request = protowire.AppendBytes(request, entry)
	}
	var response []byte
	call, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := cc.Invoke(call, service+"AckMessage", &request, &response); err != nil {
		return false, err
	}
	return statusCode(response) == codeOK, nil
}

func receiveLoop(ctx context.Context, cc *grpc.ClientConn, o *options, stop time.Time, r *recorder) error {
	for time.Now().Before(stop) {
		started := time.Now()
		got, ok, err := receiveOnce(ctx, cc, o)
		if err != nil {
			return err
		}
		r.add("receive", started, ok)
		if !started.Before(r.counted) {
			r.messages += len(got)
			if len(got) == 0 {
				r.empty++
			}
		}
		if len(got) == 0 {
			continue
		}
		batches := [][][2][]byte{got}
		if o.ack == "each" {
			batches = batches[:0]
			for i := range got {
				batches = append(batches, got[i:i+1])
			}
		}
		for _, batch := range batches {
			started := time.Now()
			ok, err := ackOnce(ctx, cc, o, batch)
			if err != nil {
				return err
			}
			r.add("ack", started, ok)
		}
	}
	return nil
}

func percentile(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := len(sorted) * p / 100
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return float64(sorted[i]) / float64(time.Millisecond)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "the gRPC port (plaintext HTTP/2)")
	mode := flag.String("mode", "send", "send or receive")
	requestsPath := flag.String("requests", "", "the requests file (4-byte length, bytes; repeated)")
	ackPath := flag.String("ack-prefix", "", "receive: the AckMessageRequest's group and topic, serialized")
	ack := flag.String("ack", "batch", "receive: ack 'each' message in a call of its own, or the 'batch' in one")
	inflight := flag.Int("inflight", 1, "calls in flight (one goroutine each)")
	conns := flag.Int("conns", 1, "connections the goroutines share out")
	warmup := flag.Float64("warmup", 2, "seconds not counted first")
	seconds := flag.Float64("seconds", 5, "seconds counted")
	clientID := flag.String("client-id", "bench-grpc-load", "the x-mq-client-id metadata")
	flag.Parse()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "grpc_load:", err)
		os.Exit(2)
	}
	if *mode != "send" && *mode != "receive" {
		fail(fmt.Errorf("-mode must be send or receive, not %q", *mode))
	}
	if *ack != "each" && *ack != "batch" {
		fail(fmt.Errorf("-ack must be each or batch, not %q", *ack))
	}
	if *inflight < 1 || *conns < 1 {
		fail(errors.New("-inflight and -conns must be at least 1"))
	}
	o := &options{mode: *mode, ack: *ack, timeout: 30 * time.Second}
	var err error
	if o.requests, err = readFrames(*requestsPath); err != nil {
		fail(err)
	}
	if *mode == "receive" {
		if o.ackPrefix, err = ioutil.ReadFile(*ackPath); err != nil {
			fail(err)
		}
	}
	var clients []*grpc.ClientConn
	for i := 0; i < *conns; i++ {
		cc, err := grpc.Dial(*addr, grpc.WithInsecure(), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		if err != nil {
			fail(err)
		}
		defer cc.Close()
		clients = append(clients, cc)
	}
	ctx := metadata.AppendToOutgoingContext(
		context.Background(), "x-mq-client-id", *clientID, "x-mq-protocol", "GRPC_V2", "x-mq-language", "GOLANG",
	)
	counted := time.Now().Add(time.Duration(*warmup * float64(time.Second)))
	stop := counted.Add(time.Duration(*seconds * float64(time.Second)))
	recorders := make([]*recorder, *inflight)
	errs := make([]error, *inflight)
	var wg sync.WaitGroup
	for w := 0; w < *inflight; w++ {
		recorders[w] = newRecorder(counted)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cc := clients[w%len(clients)]
			if *mode == "send" {
				errs[w] = sendLoop(ctx, cc, o, w, stop, recorders[w])
			} else {
				errs[w] = receiveLoop(ctx, cc, o, stop, recorders[w])
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			fail(err)
		}
	}
	out := map[string]interface{}{"mode": *mode, "inflight": *inflight}
	messages := 0
	for _, kind := range []string{"send", "receive", "ack"} {
		var all []time.Duration
		errorCount := 0
		for _, r := range recorders {
			all = append(all, r.took[kind]...)
			errorCount += r.errors[kind]
		}
		if len(all) == 0 && errorCount == 0 {
			continue
		}
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		out[kind] = map[string]interface{}{
			"calls": len(all), "calls_per_s": float64(len(all)) / *seconds,
			"p50_ms": percentile(all, 50), "p99_ms": percentile(all, 99), "errors": errorCount,
		}
	}
	empty := 0
	for _, r := range recorders {
		messages += r.messages
		empty += r.empty
	}
	if *mode == "receive" {
		out["messages_per_s"] = float64(messages) / *seconds
		out["empty_receives"] = empty
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
