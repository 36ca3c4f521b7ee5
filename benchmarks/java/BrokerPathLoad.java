import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * The issue 33 load on the broker path, driven by the official Java 4.9.7 producer
 * (benchmarks/broker_path_vs_java.py compiles and runs it, one JVM per server and round):
 *
 *   BrokerPathLoad NAMESRV TOPIC SECONDS WARMUP_SECONDS ROW...
 *
 * ROW is sync1 (one thread, send()), sync16 (16 threads), async256 (send(msg, callback) with 256 in
 * flight) or batch32 (send(Collection) of 32 messages, one thread). Every message has a 1 KiB body, a
 * key (KEYS) and TAGS; the topic is created by the warm-up (async, 64 in flight; the JIT warms too),
 * with 8 queues. Each row is measured for SECONDS after 1 s of the same load uncounted, and printed as
 * one JSON line: row, msgs (acknowledged SEND_OK), seconds, msgs_per_s, p50_ms, p99_ms (per send
 * call: a batch's latency is its call's), errors (exceptions and non-SEND_OK results). The timed part
 * of each row is between the lines {"mark":"start","row":ROW} and {"mark":"end",...}, where the caller
 * reads the server's and this JVM's CPU time (as BrokerPathConsume does).
 */
public final class BrokerPathLoad {
    private static final byte[] BODY = new byte[1024];
    private static final AtomicLong SEQ = new AtomicLong();

    private BrokerPathLoad() {
    }

    /** Latencies in microseconds, one slot per send call, for the percentiles. */
    private static final class Tally {
        private long[] micros = new long[1 << 16];
        private int n;
        private long msgs;
        private long errors;

        synchronized void ok(long startNs, int count) {
            if (n == micros.length) {
                micros = Arrays.copyOf(micros, n * 2);
            }
            micros[n++] = (System.nanoTime() - startNs) / 1000;
            msgs += count;
        }

        synchronized void error() {
            errors++;
        }

        synchronized String json(String row, double seconds) {
            long[] sorted = Arrays.copyOf(micros, n);
            Arrays.sort(sorted);
            double p50 = n == 0 ? -1 : sorted[(int) Math.min(n - 1, (long) (n * 0.50))] / 1000.0;
            double p99 = n == 0 ? -1 : sorted[(int) Math.min(n - 1, (long) (n * 0.99))] / 1000.0;
            return String.format(
                "{\"row\":\"%s\",\"msgs\":%d,\"seconds\":%.3f,\"msgs_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
                    + "\"errors\":%d}",
                row, msgs, seconds, msgs / seconds, p50, p99, errors);
        }
    }

    /** A line the caller reads the CPU times at: the start and the end of a row's timed part. */
    private static void mark(String what, String row) {
        System.out.println("{\"mark\":\"" + what + "\",\"row\":\"" + row + "\"}");
        System.out.flush();
    }

    private static Message message(String topic) {
        long i = SEQ.incrementAndGet();
        Message msg = new Message(topic, "TagL", "load-" + i, BODY);
        return msg;
    }

    /** Runs a row until deadlineNs, counting into tally. */
    private static void run(DefaultMQProducer producer, String topic, String row, long deadlineNs, Tally tally)
        throws Exception {
        switch (row) {
            case "sync1":
                syncThreads(producer, topic, 1, deadlineNs, tally);
                break;
            case "sync16":
                syncThreads(producer, topic, 16, deadlineNs, tally);
                break;
            case "async256":
                async(producer, topic, 256, deadlineNs, tally);
                break;
            case "batch32":
                while (System.nanoTime() < deadlineNs) {
                    List<Message> batch = new ArrayList<>(32);
                    for (int k = 0; k < 32; k++) {
                        batch.add(message(topic));
                    }
                    long t0 = System.nanoTime();
                    try {
                        SendResult r = producer.send(batch);
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            tally.ok(t0, 32);
                        } else {
                            tally.error();
                        }
                    } catch (Exception e) {
                        tally.error();
                    }
                }
                break;
            default:
                throw new IllegalArgumentException("unknown row " + row);
        }
    }

    private static void syncThreads(DefaultMQProducer producer, String topic, int threads, long deadlineNs, Tally tally)
        throws InterruptedException {
        Thread[] pool = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            pool[t] = new Thread(() -> {
                while (System.nanoTime() < deadlineNs) {
                    long t0 = System.nanoTime();
                    try {
                        SendResult r = producer.send(message(topic));
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            tally.ok(t0, 1);
                        } else {
                            tally.error();
                        }
                    } catch (Exception e) {
                        tally.error();
                    }
                }
            });
            pool[t].start();
        }
        for (Thread t : pool) {
            t.join();
        }
    }

    private static void async(DefaultMQProducer producer, String topic, int inFlight, long deadlineNs, Tally tally)
        throws InterruptedException {
        Semaphore slots = new Semaphore(inFlight);
        while (System.nanoTime() < deadlineNs) {
            if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                continue;
            }
            long t0 = System.nanoTime();
            try {
                producer.send(message(topic), new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            tally.ok(t0, 1);
                        } else {
                            tally.error();
                        }
                        slots.release();
                    }

                    @Override
                    public void onException(Throwable e) {
                        tally.error();
                        slots.release();
                    }
                });
            } catch (Exception e) {
                tally.error();
                slots.release();
            }
        }
        slots.tryAcquire(inFlight, 10, TimeUnit.SECONDS); // the last callbacks
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: BrokerPathLoad NAMESRV TOPIC SECONDS WARMUP_SECONDS ROW...");
            System.exit(2);
        }
        String topic = args[1];
        double seconds = Double.parseDouble(args[2]);
        double warmup = Double.parseDouble(args[3]);
        DefaultMQProducer producer = new DefaultMQProducer("broker_path_load");
        producer.setNamesrvAddr(args[0]);
        producer.setInstanceName("broker-path-load-" + ProcessHandle.current().pid());
        producer.setDefaultTopicQueueNums(8);
        producer.setSendMsgTimeout(10000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setRetryTimesWhenSendAsyncFailed(0);
        producer.start();
        try {
            // the topic: the first sends create it (retried: the route comes from TBW102 first)
            for (int i = 0; i < 50; i++) {
                try {
                    producer.send(message(topic));
                    break;
                } catch (Exception e) {
                    Thread.sleep(200);
                }
            }
            async(producer, topic, 64, System.nanoTime() + (long) (warmup * 1e9), new Tally());
            for (int k = 4; k < args.length; k++) {
                String row = args[k];
                run(producer, topic, row, System.nanoTime() + 1_000_000_000L, new Tally());
                Tally tally = new Tally();
                mark("start", row);
                long t0 = System.nanoTime();
                run(producer, topic, row, t0 + (long) (seconds * 1e9), tally);
                double elapsed = (System.nanoTime() - t0) / 1e9;
                mark("end", row);
                System.out.println(tally.json(row, elapsed));
                System.out.flush();
            }
        } finally {
            producer.shutdown();
        }
    }
}
