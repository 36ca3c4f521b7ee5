// The official Go 4.x client (github.com/apache/rocketmq-client-go/v2, the remoting client): a
// producer and a push consumer over a two-broker cluster while the test makes one broker fail.
// The Go twin of tests/server/java/ClusterFailover.java, driven by the same lines on stdin so the
// test decides when a broker goes down or comes back:
//
//	send N PHASE          sends N messages "PHASE-i" synchronously, one JSON line per send on
//	                      stdout ({"phase","body","broker","status","ms"} or {"phase","body",
//	                      "error","ms"}), then "DONE"
//	align SECONDS         waits until the client's next route poll is SECONDS behind, then prints
//	                      "ALIGNED": the client polls the name server every 30 s from its start
//	                      (fixed in v2.1.2), so a phase after "align" sees the routes of now
//	await PHASE SECONDS   waits until every message of PHASE sent OK was received (or SECONDS),
//	                      prints {"awaited":PHASE,"missing":[...]}
//	finish SECONDS        waits until every message sent OK was received (or SECONDS), prints
//	                      {"missing":[...],"received":N} and exits
//
// The client's own log (rlog) goes to stderr, one line per entry with a millisecond clock so two
// runs compare; its level is RMQ_GO_CLIENT_LOG_LEVEL (debug, info, warn, error; warn when unset).
// Judging is the test's business.
// Args: NAMESRV_ADDR TOPIC
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// routePoll is the client's fixed interval between name server polls (_PullNameServerInterval).
const routePoll = 30 * time.Second

// stderrLogger is rlog's Logger writing "HH:MM:SS.mmm LEVEL msg key=value ..." lines to stderr.
type stderrLogger struct {
	sync.Mutex
	level int
}

var levels = map[string]int{"debug": 0, "info": 1, "warn": 2, "warning": 2, "error": 3, "fatal": 4}

func (l *stderrLogger) log(level int, name, msg string, fields map[string]interface{}) {
	if level < l.level {
		return
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(time.Now().UTC().Format("15:04:05.000") + " " + name + " " + msg)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%q", k, fmt.Sprint(fields[k]))
	}
	l.Lock()
	fmt.Fprintln(os.Stderr, b.String())
	l.Unlock()
}

func (l *stderrLogger) Debug(msg string, f map[string]interface{})   { l.log(0, "DEBUG", msg, f) }
func (l *stderrLogger) Info(msg string, f map[string]interface{})    { l.log(1, "INFO", msg, f) }
func (l *stderrLogger) Warning(msg string, f map[string]interface{}) { l.log(2, "WARN", msg, f) }
func (l *stderrLogger) Error(msg string, f map[string]interface{})   { l.log(3, "ERROR", msg, f) }
func (l *stderrLogger) Fatal(msg string, f map[string]interface{}) {
	l.log(4, "FATAL", msg, f)
	os.Exit(3)
}
func (l *stderrLogger) Level(level string) {
	if n, ok := levels[strings.ToLower(level)]; ok {
		l.level = n
	}
}
func (l *stderrLogger) OutputPath(path string) error { return nil }

type bodies struct {
	sync.Mutex
	set map[string]bool
}

func (b *bodies) add(body string) {
	b.Lock()
	b.set[body] = true
	b.Unlock()
}

// missing lists the bodies of sent (with the prefix) that received does not hold, sorted.
func missing(sent, received *bodies, prefix string) []string {
	sent.Lock()
	defer sent.Unlock()
	received.Lock()
	defer received.Unlock()
	out := []string{}
	for body := range sent.set {
		if strings.HasPrefix(body, prefix) && !received.set[body] {
			out = append(out, body)
		}
	}
	sort.Strings(out)
	return out
}

func waitReceived(sent, received *bodies, prefix string, seconds int) []string {
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	for {
		left := missing(sent, received, prefix)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func emit(value interface{}) {
	line, err := json.Marshal(value)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(line))
}

func main() {
	ns, topic := os.Args[1], os.Args[2]
	logger := &stderrLogger{level: levels["warn"]}
	logger.Level(os.Getenv("RMQ_GO_CLIENT_LOG_LEVEL"))
	rlog.SetLogger(logger)
	resolver := primitive.NewPassthroughResolver([]string{ns})
	received := &bodies{set: map[string]bool{}}
	sentOk := &bodies{set: map[string]bool{}}

	push, err := rocketmq.NewPushConsumer(
		consumer.WithGroupName("failover_consumer_go"),
		consumer.WithNsResolver(resolver),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(2)
	}
	err = push.Subscribe(topic, consumer.MessageSelector{},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				received.add(string(m.Body))
			}
			return consumer.ConsumeSuccess, nil
		})
	// the consumer starts the client instance the producer shares, and with it the route poll
	started := time.Now()
	if err == nil {
		err = push.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer start:", err)
		os.Exit(2)
	}
	prod, err := rocketmq.NewProducer(
		producer.WithGroupName("failover_producer_go"),
		producer.WithNsResolver(resolver),
		producer.WithSendMsgTimeout(3*time.Second),
		producer.WithRetry(2),
	)
	if err == nil {
		err = prod.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer start:", err)
		os.Exit(2)
	}
	fmt.Println("READY")

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd := strings.Fields(in.Text())
		if len(cmd) == 0 {
			continue
		}
		switch cmd[0] {
		case "send":
			n, _ := strconv.Atoi(cmd[1])
			for i := 0; i < n; i++ {
				body := fmt.Sprintf("%s-%d", cmd[2], i)
				start := time.Now()
				res, err := prod.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
				ms := time.Since(start).Milliseconds()
				if err != nil {
					emit(map[string]interface{}{"phase": cmd[2], "body": body, "error": err.Error(), "ms": ms})
					continue
				}
				status := "OTHER"
				if res.Status == primitive.SendOK {
					status = "SEND_OK"
					sentOk.add(body)
				}
				emit(map[string]interface{}{
					"phase": cmd[2], "body": body, "broker": res.MessageQueue.BrokerName, "status": status, "ms": ms,
				})
			}
			fmt.Println("DONE")
		case "align":
			seconds, _ := strconv.Atoi(cmd[1])
			// polls at started + 10 ms + k * 30 s; wait for the first one from now, plus SECONDS
			since := time.Since(started)
			next := (since/routePoll + 1) * routePoll
			time.Sleep(next - since + time.Duration(seconds)*time.Second)
			fmt.Println("ALIGNED")
		case "await":
			seconds, _ := strconv.Atoi(cmd[2])
			emit(map[string]interface{}{"awaited": cmd[1], "missing": waitReceived(sentOk, received, cmd[1]+"-", seconds)})
		case "finish":
			seconds, _ := strconv.Atoi(cmd[1])
			left := waitReceived(sentOk, received, "", seconds)
			received.Lock()
			count := len(received.set)
			received.Unlock()
			emit(map[string]interface{}{"missing": left, "received": count})
			_ = prod.Shutdown()
			_ = push.Shutdown()
			os.Exit(0)
		}
	}
	_ = prod.Shutdown()
	_ = push.Shutdown()
}
