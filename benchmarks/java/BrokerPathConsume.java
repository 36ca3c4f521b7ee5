import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The consume side of issue 33's load, driven by the official Java 4.9.7 DefaultMQPushConsumer
 * (benchmarks/broker_path_vs_java.py compiles and runs it, one JVM per server and round):
 *
 *   BrokerPathConsume NAMESRV TOPIC MESSAGES SECONDS WARMUP_SECONDS ROW...
 *
 * ROW push: MESSAGES messages (1 KiB body, a key, TAGS) are stored first on TOPIC-push (8 queues;
 * batches of 32 from 4 threads, not timed), then a push consumer of a new group
 * (subscription "*", CONSUME_FROM_FIRST_OFFSET, the client's defaults otherwise) is started; the row
 * is the time from its start to the MESSAGES-th message delivered to the listener.
 *
 * ROW orderly: as push, on TOPIC-orderly, with a MessageListenerOrderly (the consumer locks its
 * queues with LOCK_BATCH_MQ before it pulls, and consumes each queue in order).
 *
 * ROW lite: as push, on TOPIC-lite, with a DefaultLitePullConsumer (subscribe "*",
 * CONSUME_FROM_FIRST_OFFSET, the client's defaults otherwise: auto-commit, pull batches of 10); the
 * row is the time from its start to the MESSAGES-th message returned by poll().
 *
 * ROW e2e: a push consumer of a new group on TOPIC-e2e (created first) while one producer thread
 * sends 200 msgs/s (paced by the clock, sync sends), each message carrying the System.nanoTime() taken
 * just before its send() in a property; the latency of a message is the listener's nanoTime minus
 * that (one JVM, one clock). WARMUP_SECONDS of this load uncounted, then SECONDS counted: p50 / p99 of
 * the messages sent in that window (waiting up to 10 s for the last ones; a message never delivered
 * counts as an error); the e2e line also gives the sends' own send_p50_ms / send_p99_ms and the
 * slowest message's max_ms. With the environment variable BP_E2E_DUMP set to a file name, each counted
 * message is also written there as a line "sent_ns latency_us" (its send's nanoTime and its latency)
 * and each counted send as "send sent_ns send_us": benchmarks/loop_turns.py lines them up with what
 * the server did at that moment (nanoTime and Python's perf_counter read the same monotonic clock).
 *
 * The timed part of each row is between the lines {"mark":"start","row":ROW} and {"mark":"end",...}
 * (the caller reads the server's CPU time there). Each row prints one JSON line: row, msgs, seconds, msgs_per_s, p50_ms, p99_ms, errors.
 */
public final class BrokerPathConsume {
    private static final byte[] BODY = new byte[1024];
    private static final AtomicLong SEQ = new AtomicLong();
    private static final String SENT = "bpSentNs";

    private BrokerPathConsume() {
    }

    private static Message message(String topic) {
        return new Message(topic, "TagL", "consume-" + SEQ.incrementAndGet(), BODY);
    }

    private static String json(String row, long msgs, double seconds, double p50, double p99, long errors) {
        return String.format(
            "{\"row\":\"%s\",\"msgs\":%d,\"seconds\":%.3f,\"msgs_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
                + "\"errors\":%d}",
            row, msgs, seconds, msgs / seconds, p50, p99, errors);
    }

    /** A line the caller reads the server's CPU time at: the start and the end of a row's timed part. */
    private static void mark(String what, String row) {
        System.out.println("{\"mark\":\"" + what + "\",\"row\":\"" + row + "\"}");
        System.out.flush();
    }

    /** The topic created by a first send (retried: the route comes from TBW102 first). */
    private static void create(DefaultMQProducer producer, String topic) throws Exception {
        Exception last = null;
        for (int i = 0; i < 50; i++) {
            try {
                if (producer.send(message(topic)).getSendStatus() == SendStatus.SEND_OK) {
                    return;
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("cannot create " + topic, last);
    }

    private static DefaultMQPushConsumer consumer(String namesrv, String group, String topic, ConsumeFromWhere from,
        MessageListenerConcurrently listener) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(group);
        consumer.setConsumeFromWhere(from);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener(listener);
        return consumer;
    }

    /** MESSAGES messages on topic (batches of 32 from 4 threads), not timed. */
    private static void store(DefaultMQProducer producer, String topic, int messages) throws Exception {
        create(producer, topic);
        int threads = 4;
        AtomicLong left = new AtomicLong(messages - 1);
        AtomicLong errors = new AtomicLong();
        Thread[] pool = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            pool[t] = new Thread(() -> {
                while (true) {
                    long n = Math.min(32, left.getAndAdd(-32));
                    if (n <= 0) {
                        return;
                    }
                    List<Message> batch = new ArrayList<>((int) n);
                    for (int k = 0; k < n; k++) {
                        batch.add(message(topic));
                    }
                    boolean sent = false;
                    for (int attempt = 0; attempt < 5 && !sent; attempt++) {
                        try {
                            sent = producer.send(batch).getSendStatus() == SendStatus.SEND_OK;
                        } catch (Exception e) {
                            sent = false;
                        }
                    }
                    if (!sent) {
                        errors.incrementAndGet();
                    }
                }
            });
            pool[t].start();
        }
        for (Thread t : pool) {
            t.join();
        }
        if (errors.get() != 0) {
            throw new IllegalStateException(errors.get() + " batches not stored");
        }
        Thread.sleep(1000); // the store settles (the real broker's reput and flush) before the timed part
    }

    /** The push and orderly rows: MESSAGES stored, then a new group's push consumer from the first offset. */
    private static void push(DefaultMQProducer producer, String namesrv, String topic, int messages, String row)
        throws Exception {
        store(producer, topic, messages);
        AtomicLong delivered = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        long[] endNs = new long[1];
        String group = "bp_" + row + "_" + ProcessHandle.current().pid();
        Runnable count = () -> {
            if (delivered.get() >= messages && done.getCount() > 0) {
                synchronized (endNs) {
                    if (endNs[0] == 0) {
                        endNs[0] = System.nanoTime();
                    }
                }
                done.countDown();
            }
        };
        DefaultMQPushConsumer consumer = consumer(namesrv, group, topic, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            (msgs, context) -> {
                delivered.addAndGet(msgs.size());
                count.run();
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        if (row.equals("orderly")) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                delivered.addAndGet(msgs.size());
                count.run();
                return ConsumeOrderlyStatus.SUCCESS;
            });
        }
        mark("start", row);
        long t0 = System.nanoTime();
        consumer.start();
        boolean all = done.await(600, TimeUnit.SECONDS);
        long end;
        synchronized (endNs) {
            end = all ? endNs[0] : System.nanoTime();
        }
        mark("end", row);
        long got = Math.min(delivered.get(), messages);
        System.out.println(json(row, got, (end - t0) / 1e9, -1, -1, messages - got));
        System.out.flush();
        consumer.shutdown();
    }

    /** The lite row: MESSAGES stored, then a new group's DefaultLitePullConsumer polling from the first offset. */
    private static void lite(DefaultMQProducer producer, String namesrv, String topic, int messages)
        throws Exception {
        store(producer, topic, messages);
        String group = "bp_lite_" + ProcessHandle.current().pid();
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(group);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        mark("start", "lite");
        long t0 = System.nanoTime();
        consumer.start();
        long got = 0;
        long deadline = t0 + 600_000_000_000L;
        while (got < messages && System.nanoTime() < deadline) {
            got += consumer.poll(1000).size();
        }
        long end = System.nanoTime();
        mark("end", "lite");
        got = Math.min(got, messages);
        System.out.println(json("lite", got, (end - t0) / 1e9, -1, -1, messages - got));
        System.out.flush();
        consumer.shutdown();
    }

    private static void e2e(DefaultMQProducer producer, String namesrv, String topic, double seconds,
        double warmup) throws Exception {
        create(producer, topic);
        long[] micros = new long[(int) (seconds * 200) + 1024];
        long[] sentNs = new long[micros.length]; // each counted message's send nanoTime (for BP_E2E_DUMP)
        int[] n = new int[1];
        long[] window = {Long.MAX_VALUE, Long.MAX_VALUE}; // [from, to) of the counted sends' nanoTime
        String group = "bp_e2e_" + ProcessHandle.current().pid();
        DefaultMQPushConsumer consumer = consumer(namesrv, group, topic, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            (msgs, context) -> {
                long now = System.nanoTime();
                for (MessageExt m : msgs) {
                    String sent = m.getUserProperty(SENT);
                    if (sent == null) {
                        continue;
                    }
                    long at = Long.parseLong(sent);
                    synchronized (micros) {
                        if (at >= window[0] && at < window[1] && n[0] < micros.length) {
                            sentNs[n[0]] = at;
                            micros[n[0]++] = (now - at) / 1000;
                        }
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        consumer.start();
        Thread.sleep(2000); // the rebalance assigns the queues and the first pulls are held
        long errors = 0;
        long start = System.nanoTime();
        long counted = 0;
        long[] sends = new long[(int) (seconds * 200) + 1024];
        long[] sendsAt = new long[sends.length];
        int ns = 0;
        long warmEnd = start + (long) (warmup * 1e9);
        long end = warmEnd + (long) (seconds * 1e9);
        for (long i = 0; ; i++) {
            long due = start + i * 5_000_000L; // 200 msgs/s
            if (due >= end) {
                break;
            }
            long wait = due - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
            if (due >= warmEnd && window[0] == Long.MAX_VALUE) {
                mark("start", "e2e");
                synchronized (micros) {
                    window[0] = System.nanoTime();
                }
            }
            Message m = message(topic);
            long at = System.nanoTime();
            m.putUserProperty(SENT, Long.toString(at));
            try {
                SendResult r = producer.send(m);
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    errors++;
                } else if (at >= window[0]) {
                    counted++;
                    if (ns < sends.length) {
                        sendsAt[ns] = at;
                        sends[ns++] = (System.nanoTime() - at) / 1000;
                    }
                }
            } catch (Exception e) {
                errors++;
            }
        }
        synchronized (micros) {
            window[1] = System.nanoTime();
        }
        mark("end", "e2e");
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() < deadline) {
            synchronized (micros) {
                if (n[0] >= counted) {
                    break;
                }
            }
            Thread.sleep(20);
        }
        long[] sorted;
        synchronized (micros) {
            sorted = Arrays.copyOf(micros, n[0]);
            String dump = System.getenv("BP_E2E_DUMP");
            if (dump != null && !dump.isEmpty()) {
                try (java.io.PrintWriter out = new java.io.PrintWriter(dump, "UTF-8")) {
                    for (int i = 0; i < n[0]; i++) {
                        out.println(sentNs[i] + " " + micros[i]);
                    }
                    for (int i = 0; i < ns; i++) {
                        out.println("send " + sendsAt[i] + " " + sends[i]);
                    }
                }
            }
        }
        consumer.shutdown();
        Arrays.sort(sorted);
        int k = sorted.length;
        double p50 = k == 0 ? -1 : sorted[(int) Math.min(k - 1, (long) (k * 0.50))] / 1000.0;
        double p99 = k == 0 ? -1 : sorted[(int) Math.min(k - 1, (long) (k * 0.99))] / 1000.0;
        long[] sendSorted = Arrays.copyOf(sends, ns);
        Arrays.sort(sendSorted);
        String row = json("e2e", k, seconds, p50, p99, errors + Math.max(0, counted - k));
        // the sends' own p50 / p99 too: a slow send is part of a message's latency
        System.out.println(String.format("%s,\"send_p50_ms\":%.3f,\"send_p99_ms\":%.3f,\"max_ms\":%.3f}",
            row.substring(0, row.length() - 1),
            ns == 0 ? -1 : sendSorted[(int) (ns * 0.50)] / 1000.0,
            ns == 0 ? -1 : sendSorted[Math.min(ns - 1, (int) (ns * 0.99))] / 1000.0,
            k == 0 ? -1 : sorted[k - 1] / 1000.0));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: BrokerPathConsume NAMESRV TOPIC MESSAGES SECONDS WARMUP_SECONDS ROW...");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        int messages = Integer.parseInt(args[2]);
        double seconds = Double.parseDouble(args[3]);
        double warmup = Double.parseDouble(args[4]);
        DefaultMQProducer producer = new DefaultMQProducer("broker_path_consume");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("broker-path-consume-" + ProcessHandle.current().pid());
        producer.setDefaultTopicQueueNums(8);
        producer.setSendMsgTimeout(10000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            for (int k = 5; k < args.length; k++) {
                switch (args[k]) {
                    case "push":
                    case "orderly":
                        push(producer, namesrv, topic + "-" + args[k], messages, args[k]);
                        break;
                    case "lite":
                        lite(producer, namesrv, topic + "-lite", messages);
                        break;
                    case "e2e":
                        e2e(producer, namesrv, topic + "-e2e", seconds, warmup);
                        break;
                    default:
                        throw new IllegalArgumentException("unknown row " + args[k]);
                }
            }
        } finally {
            producer.shutdown();
        }
    }
}
