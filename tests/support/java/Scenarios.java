/*
 * Consumer scenarios of issue 19, written as a test author would write them with the official
 * RocketMQ 4.9.7 Java client (DefaultMQProducer, TransactionMQProducer, DefaultMQPushConsumer,
 * DefaultLitePullConsumer, DefaultMQAdminExt).
 *
 *     java -cp "rocketmq-4.9.7-bin/lib/*:CLASSES" Scenarios NAMESRV_ADDR SCENARIO RUN_ID [ARGS...]
 *
 * Each run prints exactly one JSON line of what it observed (counts, orders, reconsume times, elapsed
 * milliseconds, errors) and exits 0: whether that is a pass is decided by the Python test that reads
 * it, against what the real broker gave (tests/server/golden/java_scenarios_4.9.7.json). Topic and
 * group names are derived from RUN_ID so that runs never share state. Every wait is bounded by the
 * system property scenario.waitMs (default 40000 ms); a wait that runs out is recorded, not thrown.
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.trace.TraceContext;
import org.apache.rocketmq.client.trace.TraceDataEncoder;
import org.apache.rocketmq.common.admin.TopicOffset;
import org.apache.rocketmq.common.admin.TopicStatsTable;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class Scenarios {
    static final long WAIT_MS = Long.getLong("scenario.waitMs", 40000L);
    /** Extra time after a wait is satisfied, to see deliveries that should not come (duplicates, filtered tags). */
    static final long GRACE_MS = Long.getLong("scenario.graceMs", 2000L);
    /**
     * The clients' own calls (a route lookup at start, an admin query): 3 s by default, which a route
     * lookup overran when the suite's four workers started a row's twenty JVMs at once on two cores
     * (the client then throws instead of retrying). Waiting longer changes nothing a row observes.
     */
    static final int API_TIMEOUT_MS = Integer.getInteger("scenario.apiTimeoutMs", 15000);
    /**
     * A synchronous send's whole budget (sendMsgTimeout): the client spends it on the route lookup
     * of a new topic too (up to API_TIMEOUT_MS above) before the send itself and its retries, so it
     * must be longer than that lookup or a slow but successful lookup ends the send ("send message
     * Exception" from sendMessageInTransaction, "sendDefaultImpl call timeout" from send).
     */
    static final int SEND_TIMEOUT_MS = Integer.getInteger("scenario.sendTimeoutMs", 2 * API_TIMEOUT_MS);

    final String namesrv;
    final String id;
    final Map<String, Object> obs = new LinkedHashMap<>();
    final List<Runnable> closers = new ArrayList<>();
    final AtomicInteger instances = new AtomicInteger();

    /** An exception and its causes, each "class: message", so a wrapped failure says what it wraps. */
    static String causes(Throwable e) {
        StringBuilder text = new StringBuilder();
        for (int depth = 0; e != null && depth < 8; e = e.getCause(), depth++) {
            text.append(depth == 0 ? "" : " <- caused by ").append(e.getClass().getName()).append(": ")
                .append(e.getMessage());
        }
        return text.toString();
    }

    Scenarios(String namesrv, String id) {
        this.namesrv = namesrv;
        this.id = id;
    }

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: Scenarios NAMESRV_ADDR SCENARIO RUN_ID [ARGS...]");
            System.exit(2);
        }
        Scenarios s = new Scenarios(args[0], args[2]);
        String[] rest = java.util.Arrays.copyOfRange(args, 3, args.length);
        s.obs.put("scenario", args[1]);
        long start = System.currentTimeMillis();
        try {
            s.run(args[1], rest);
        } catch (Throwable e) {
            s.obs.put("error", causes(e));
        } finally {
            s.closeAll();
        }
        s.obs.put("elapsedMs", System.currentTimeMillis() - start);
        System.out.println(Json.write(s.obs));
        System.out.flush();
        System.exit(0);
    }

    void run(String scenario, String[] args) throws Exception {
        switch (scenario) {
            case "push": push(); break;
            case "committed": committed(args.length > 0 ? args[0] : "both"); break;
            case "retry": retry(); break;
            case "dlq": dlq(); break;
            case "orderly": orderly(); break;
            case "delay": delay(); break;
            case "transaction": transaction(); break;
            case "sendkinds": sendKinds(); break;
            case "tags": tags(); break;
            case "broadcast": broadcast(); break;
            case "litepull": litePull(); break;
            case "trace": trace(); break;
            case "consume5": consume5(args[0], Integer.parseInt(args[1])); break;
            case "produce4": produce4(args[0]); break;
            default: throw new IllegalArgumentException("unknown scenario " + scenario);
        }
    }

    // ---- names, clients and waits ----------------------------------------------------------

    String topic(String what) {
        return "JS_" + what + "_" + id;
    }

    String group(String what) {
        return "JSG_" + what + "_" + id;
    }

    String instance() {
        return "scn-" + id + "-" + instances.incrementAndGet();
    }

    DefaultMQProducer producer(String what) throws Exception {
        return producer(new DefaultMQProducer("JSP_" + what + "_" + id));
    }

    <P extends DefaultMQProducer> P producer(P p) throws Exception {
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instance());
        p.setSendMsgTimeout(SEND_TIMEOUT_MS); // JVMs and the server share two cores in CI
        p.setMqClientApiTimeout(API_TIMEOUT_MS);
        p.start();
        closers.add(p::shutdown);
        return p;
    }

    DefaultMQPushConsumer consumer(String group, String topic, String expression) throws Exception {
        return consumer(new DefaultMQPushConsumer(group), topic, expression);
    }

    DefaultMQPushConsumer consumer(DefaultMQPushConsumer c, String topic, String expression) throws Exception {
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance());
        c.setMqClientApiTimeout(API_TIMEOUT_MS);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, expression);
        return c;
    }

    void start(DefaultMQPushConsumer c) throws Exception {
        c.start();
        closers.add(c::shutdown);
    }

    /** Waits until the condition holds or WAIT_MS ran out; true when it holds. */
    static boolean await(BooleanSupplier condition) throws InterruptedException {
        return await(condition, WAIT_MS);
    }

    static boolean await(BooleanSupplier condition, long ms) throws InterruptedException {
        long deadline = System.currentTimeMillis() + ms;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() >= deadline) {
                return false;
            }
            Thread.sleep(50);
        }
        return true;
    }

    /** Whether the push consumer's rebalance has given it a queue of {@code topic}. */
    static boolean holdsQueueOf(DefaultMQPushConsumer c, String topic) {
        return c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet().stream()
            .anyMatch(mq -> mq.getTopic().equals(topic));
    }

    void closeAll() {
        List<Runnable> todo = new ArrayList<>(closers);
        Collections.reverse(todo);
        closers.clear();
        for (Runnable r : todo) {
            Thread t = new Thread(() -> {
                try {
                    r.run();
                } catch (Throwable ignored) {
                    // a client that cannot stop cleanly does not change what was observed
                }
            });
            t.setDaemon(true);
            t.start();
            try {
                t.join(10000);
            } catch (InterruptedException ignored) {
                return;
            }
        }
    }

    static Message message(String topic, String tags, String body) {
        return new Message(topic, tags, body.getBytes(StandardCharsets.UTF_8));
    }

    static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    /** Bodies received by a concurrently consuming listener, in arrival order (duplicates kept). */
    static final class Collector implements MessageListenerConcurrently {
        final List<String> bodies = new CopyOnWriteArrayList<>();

        @Override
        public ConsumeConcurrentlyStatus consumeMessage(
                List<MessageExt> msgs, org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext ctx) {
            for (MessageExt m : msgs) {
                bodies.add(body(m));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        }

        int distinct() {
            return new TreeSet<>(bodies).size();
        }
    }

    void sendPlain(DefaultMQProducer p, String topic, String prefix, int count) throws Exception {
        List<String> statuses = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            SendResult r = p.send(message(topic, "TagA", prefix + i));
            statuses.add(r.getSendStatus().name());
        }
        obs.put("sendStatuses", new TreeSet<>(statuses));
    }

    /** Consumes with a fresh push consumer until `want` distinct bodies arrived, then a grace period. */
    Map<String, Object> consumeAll(String group, String topic, int want) throws Exception {
        Collector got = new Collector();
        DefaultMQPushConsumer c = consumer(group, topic, "*");
        c.registerMessageListener(got);
        long t0 = System.currentTimeMillis();
        start(c);
        boolean all = await(() -> got.distinct() >= want);
        long took = System.currentTimeMillis() - t0;
        Thread.sleep(GRACE_MS);
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("received", got.bodies.size());
        r.put("distinct", got.distinct());
        r.put("allWithinWait", all);
        r.put("msToAll", all ? took : null);
        r.put("bodies", new TreeSet<>(got.bodies));
        r.put("consumer", c);
        return r;
    }

    // ---- the scenarios -------------------------------------------------------------------

    /** Row 1: 50 sent, a push consumer (concurrently, from the first offset) receives all 50. */
    void push() throws Exception {
        String topic = topic("push");
        DefaultMQProducer p = producer("push");
        sendPlain(p, topic, "push-", 50);
        Map<String, Object> r = consumeAll(group("push"), topic, 50);
        r.remove("consumer");
        r.remove("bodies");
        obs.putAll(r);
    }

    /**
     * Row 2: a group consumes 10, shuts down (its offsets are committed on shutdown), 10 more are
     * sent, and the group started again gets exactly the 10 new ones. "first" and "second" run the
     * halves alone (same RUN_ID), so that a server restart can come between them.
     */
    void committed(String mode) throws Exception {
        String topic = topic("committed");
        String group = group("committed");
        DefaultMQProducer p = producer("committed");
        if (mode.equals("both") || mode.equals("first")) {
            sendPlain(p, topic, "old-", 10);
            Map<String, Object> r = consumeAll(group, topic, 10);
            DefaultMQPushConsumer c = (DefaultMQPushConsumer) r.remove("consumer");
            // The client takes its %RETRY% queue only at a rebalance that follows the one which
            // fetched that topic's route; two wake-ups that come together make one rebalance, and
            // then the next is the periodic one, 20 s later. Shut down once it holds the queue, so
            // that the offsets committed at shutdown (and consumerProgress's rows) do not depend
            // on that race in the client.
            await(() -> holdsQueueOf(c, "%RETRY%" + group));
            c.shutdown();
            closers.remove(closers.size() - 1);
            obs.put("first", r);
        }
        if (mode.equals("both") && ((int) ((Map<?, ?>) obs.get("first")).get("distinct")) < 10) {
            obs.put("second", "not run: the first half did not receive its 10 messages");
        } else if (mode.equals("both") || mode.equals("second")) {
            sendPlain(p, topic, "new-", 10);
            Map<String, Object> r = consumeAll(group, topic, 10);
            r.remove("consumer");
            @SuppressWarnings("unchecked")
            Collection<String> bodies = (Collection<String>) r.get("bodies");
            int old = 0;
            for (String b : bodies) {
                old += b.startsWith("old-") ? 1 : 0;
            }
            r.put("oldRedelivered", old);
            obs.put("second", r);
        }
        obs.put("topic", topic);
        obs.put("group", group);
    }

    /** Row 3: RECONSUME_LATER once; the message comes back through %RETRY%group with reconsumeTimes 1. */
    void retry() throws Exception {
        String topic = topic("retry");
        String group = group("retry");
        DefaultMQProducer p = producer("retry");
        SendResult sent = p.send(message(topic, "TagA", "retry-0"));
        List<Map<String, Object>> deliveries = new CopyOnWriteArrayList<>();
        long t0 = System.currentTimeMillis();
        DefaultMQPushConsumer c = consumer(group, topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            MessageExt m = msgs.get(0);
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("atMs", System.currentTimeMillis() - t0);
            d.put("reconsumeTimes", m.getReconsumeTimes());
            d.put("topic", m.getTopic());
            d.put("queueTopic", ctx.getMessageQueue().getTopic());
            d.put("sameMsgId", sent.getMsgId().equals(m.getMsgId()));
            d.put("retryTopicProperty", m.getProperty("RETRY_TOPIC"));
            d.put("body", body(m));
            deliveries.add(d);
            return m.getReconsumeTimes() == 0
                ? ConsumeConcurrentlyStatus.RECONSUME_LATER
                : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        start(c);
        await(() -> deliveries.size() >= 2, WAIT_MS);
        Thread.sleep(GRACE_MS);
        obs.put("retryTopic", "%RETRY%" + group);
        obs.put("deliveries", deliveries);
        if (deliveries.size() >= 2) {
            obs.put("redeliveryDelayMs", (long) deliveries.get(1).get("atMs") - (long) deliveries.get(0).get("atMs"));
        }
    }

    /** Row 4: with maxReconsumeTimes 2 a message always answered RECONSUME_LATER ends in %DLQ%group. */
    void dlq() throws Exception {
        String topic = topic("dlq");
        String group = group("dlq");
        String dlqTopic = "%DLQ%" + group;
        DefaultMQProducer p = producer("dlq");
        SendResult sent = p.send(message(topic, "TagA", "dlq-0"));
        List<Integer> times = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c = consumer(group, topic, "*");
        c.setMaxReconsumeTimes(2);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            times.add(msgs.get(0).getReconsumeTimes());
            ctx.setDelayLevelWhenNextConsume(1); // retry after 1 s instead of 10 s + ...
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        start(c);
        await(() -> times.size() >= 3);
        obs.put("deliveryReconsumeTimes", times);
        DefaultMQAdminExt admin = admin();
        long[] inDlq = {-1};
        MessageExt[] found = {null};
        await(() -> {
            try {
                TopicStatsTable stats = admin.examineTopicStats(dlqTopic);
                long n = 0;
                for (TopicOffset o : stats.getOffsetTable().values()) {
                    n += o.getMaxOffset() - o.getMinOffset();
                }
                inDlq[0] = n;
                QueryResult q = admin.queryMessageByUniqKey(dlqTopic, sent.getMsgId(), 32, 0, Long.MAX_VALUE);
                if (!q.getMessageList().isEmpty()) {
                    found[0] = q.getMessageList().get(0);
                }
            } catch (Exception e) {
                obs.put("lastDlqQueryError", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            return inDlq[0] >= 1 && found[0] != null;
        });
        Thread.sleep(GRACE_MS);
        obs.put("deliveriesAfterWait", times.size());
        obs.put("dlqTopic", dlqTopic);
        obs.put("dlqMessages", inDlq[0]);
        if (found[0] != null) {
            MessageExt m = found[0];
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("topic", m.getTopic());
            d.put("body", body(m));
            d.put("reconsumeTimes", m.getReconsumeTimes());
            d.put("sameMsgId", sent.getMsgId().equals(m.getMsgId()));
            d.put("originMessageIdSet", m.getProperty("ORIGIN_MESSAGE_ID") != null);
            d.put("retryTopicProperty", m.getProperty("RETRY_TOPIC"));
            d.put("propertyNames", new TreeSet<>(m.getProperties().keySet()));
            obs.put("dlqMessage", d);
        }
        try {
            TopicRouteData route = admin.examineTopicRouteInfo(dlqTopic);
            List<Object> queues = new ArrayList<>();
            for (QueueData q : route.getQueueDatas()) {
                queues.add(List.of(q.getReadQueueNums(), q.getWriteQueueNums(), q.getPerm()));
            }
            obs.put("dlqRoute", queues);
        } catch (Exception e) {
            obs.put("dlqRouteError", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    DefaultMQAdminExt admin() throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName(instance());
        admin.setMqClientApiTimeout(API_TIMEOUT_MS);
        admin.start();
        closers.add(admin::shutdown);
        return admin;
    }

    /** Row 5: 4 keys x 10 messages through a MessageQueueSelector by key; an orderly consumer sees each key in order. */
    void orderly() throws Exception {
        String topic = topic("orderly");
        DefaultMQProducer p = producer("orderly");
        for (int seq = 0; seq < 10; seq++) {
            for (int k = 0; k < 4; k++) {
                String key = "key" + k;
                p.send(message(topic, "TagA", key + ":" + seq), (mqs, msg, arg) ->
                    mqs.get(Math.abs(arg.hashCode()) % mqs.size()), key);
            }
        }
        Map<String, List<Integer>> byKey = new ConcurrentHashMap<>();
        AtomicInteger total = new AtomicInteger();
        DefaultMQPushConsumer c = consumer(group("orderly"), topic, "*");
        c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String[] parts = body(m).split(":");
                byKey.computeIfAbsent(parts[0], k -> new CopyOnWriteArrayList<>()).add(Integer.parseInt(parts[1]));
                total.incrementAndGet();
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        start(c);
        await(() -> total.get() >= 40);
        Thread.sleep(GRACE_MS);
        obs.put("received", total.get());
        obs.put("sequences", new TreeMap<>(byKey));
    }

    /** Row 6: a message sent with delay level 2 (5 s) is delivered about 5 s later. */
    void delay() throws Exception {
        String topic = topic("delay");
        DefaultMQProducer p = producer("delay");
        Message m = message(topic, "TagA", "delay-0");
        m.setDelayTimeLevel(2);
        long sentAt = System.currentTimeMillis();
        SendResult r = p.send(m);
        obs.put("sendStatus", r.getSendStatus().name());
        List<Long> at = new CopyOnWriteArrayList<>();
        List<Long> storedAfterBorn = new CopyOnWriteArrayList<>();
        DefaultMQPushConsumer c = consumer(group("delay"), topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt x : msgs) {
                at.add(System.currentTimeMillis() - sentAt);
                storedAfterBorn.add(x.getStoreTimestamp() - x.getBornTimestamp());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        start(c);
        await(() -> !at.isEmpty());
        Thread.sleep(GRACE_MS);
        obs.put("received", at.size());
        obs.put("deliveredAfterMs", at);
        obs.put("storedAfterBornMs", storedAfterBorn);
    }

    /** Row 7: commit, rollback, and UNKNOW resolved by the broker's check-back as commit. */
    void transaction() throws Exception {
        String topic = topic("tx");
        Map<String, List<Long>> checks = new ConcurrentHashMap<>();
        long t0 = System.currentTimeMillis();
        TransactionMQProducer p = new TransactionMQProducer("JSP_tx_" + id);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                switch (new String(msg.getBody(), StandardCharsets.UTF_8)) {
                    case "commit": return LocalTransactionState.COMMIT_MESSAGE;
                    case "rollback": return LocalTransactionState.ROLLBACK_MESSAGE;
                    default: return LocalTransactionState.UNKNOW;
                }
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.computeIfAbsent(body(msg), k -> new CopyOnWriteArrayList<>()).add(System.currentTimeMillis() - t0);
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer(p);
        Map<String, Object> sends = new LinkedHashMap<>();
        for (String what : new String[] {"commit", "rollback", "unknown"}) {
            TransactionSendResult r = p.sendMessageInTransaction(message(topic, "TagA", what), null);
            sends.put(what, r.getSendStatus().name() + "/" + r.getLocalTransactionState().name());
        }
        obs.put("sends", sends);
        Collector got = new Collector();
        DefaultMQPushConsumer c = consumer(group("tx"), topic, "*");
        c.registerMessageListener(got);
        start(c);
        List<Long> unknownAt = new CopyOnWriteArrayList<>();
        boolean both = await(() -> {
            if (unknownAt.isEmpty() && got.bodies.contains("unknown")) {
                unknownAt.add(System.currentTimeMillis() - t0);
            }
            return got.bodies.contains("commit") && got.bodies.contains("unknown");
        }, WAIT_MS + 20000);
        Thread.sleep(GRACE_MS);
        obs.put("committedAndCheckedWithinWait", both);
        obs.put("received", new ArrayList<>(got.bodies));
        obs.put("checks", new TreeMap<>(checks));
        obs.put("unknownDeliveredAtMs", unknownAt.isEmpty() ? null : unknownAt.get(0));
    }

    /** Row 8: 10 in one batch, 10 async, 10 oneway; a push consumer receives all 30. */
    void sendKinds() throws Exception {
        String topic = topic("kinds");
        DefaultMQProducer p = producer("kinds");
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            batch.add(message(topic, "TagA", "batch-" + i));
        }
        obs.put("batchStatus", p.send(batch).getSendStatus().name());
        AtomicInteger asyncOk = new AtomicInteger();
        AtomicInteger asyncFailed = new AtomicInteger();
        for (int i = 0; i < 10; i++) {
            p.send(message(topic, "TagA", "async-" + i), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    asyncOk.incrementAndGet();
                }

                @Override
                public void onException(Throwable e) {
                    asyncFailed.incrementAndGet();
                }
            });
        }
        await(() -> asyncOk.get() + asyncFailed.get() >= 10, 20000);
        obs.put("asyncOk", asyncOk.get());
        obs.put("asyncFailed", asyncFailed.get());
        for (int i = 0; i < 10; i++) {
            p.sendOneway(message(topic, "TagA", "oneway-" + i));
        }
        Map<String, Object> r = consumeAll(group("kinds"), topic, 30);
        r.remove("consumer");
        @SuppressWarnings("unchecked")
        Collection<String> bodies = (Collection<String>) r.remove("bodies");
        Map<String, Integer> kinds = new TreeMap<>();
        for (String b : bodies) {
            kinds.merge(b.substring(0, b.indexOf('-')), 1, Integer::sum);
        }
        r.put("distinctByKind", kinds);
        obs.putAll(r);
    }

    /** Row 9: TagA, TagB and TagC sent; a subscription "TagA || TagB" receives only those. */
    void tags() throws Exception {
        String topic = topic("tags");
        DefaultMQProducer p = producer("tags");
        for (int i = 0; i < 10; i++) {
            for (String tag : new String[] {"TagA", "TagB", "TagC"}) {
                p.send(message(topic, tag, tag + "-" + i));
            }
        }
        Map<String, AtomicInteger> byTag = new ConcurrentHashMap<>();
        AtomicInteger total = new AtomicInteger();
        DefaultMQPushConsumer c = consumer(group("tags"), topic, "TagA || TagB");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                byTag.computeIfAbsent(m.getTags(), k -> new AtomicInteger()).incrementAndGet();
                total.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        start(c);
        await(() -> total.get() >= 20);
        Thread.sleep(GRACE_MS + 1000);
        Map<String, Integer> counts = new TreeMap<>();
        byTag.forEach((k, v) -> counts.put(k, v.get()));
        obs.put("received", total.get());
        obs.put("byTag", counts);
    }

    /** Row 10: two BROADCASTING consumers of one group each receive all 10 messages. */
    void broadcast() throws Exception {
        String topic = topic("bcast");
        String group = group("bcast");
        DefaultMQProducer p = producer("bcast");
        sendPlain(p, topic, "bcast-", 10);
        List<Collector> collectors = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            Collector got = new Collector();
            DefaultMQPushConsumer c = consumer(group, topic, "*");
            c.setMessageModel(MessageModel.BROADCASTING);
            c.registerMessageListener(got);
            start(c);
            collectors.add(got);
        }
        await(() -> collectors.stream().allMatch(g -> g.distinct() >= 10));
        Thread.sleep(GRACE_MS);
        List<Object> each = new ArrayList<>();
        for (Collector g : collectors) {
            each.add(Map.of("received", g.bodies.size(), "distinct", g.distinct()));
        }
        obs.put("consumers", each);
    }

    /** Row 11: DefaultLitePullConsumer subscribe + poll gets the 10 messages sent. */
    void litePull() throws Exception {
        String topic = topic("lite");
        DefaultMQProducer p = producer("lite");
        sendPlain(p, topic, "lite-", 10);
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group("lite"));
        c.setNamesrvAddr(namesrv);
        c.setInstanceName(instance());
        c.setMqClientApiTimeout(API_TIMEOUT_MS);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.start();
        closers.add(c::shutdown);
        List<String> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + WAIT_MS;
        int polls = 0;
        while (new TreeSet<>(got).size() < 10 && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(1000)) {
                got.add(body(m));
            }
            polls++;
        }
        long graceEnd = System.currentTimeMillis() + GRACE_MS;
        while (System.currentTimeMillis() < graceEnd) {
            for (MessageExt m : c.poll(500)) {
                got.add(body(m));
            }
        }
        obs.put("received", got.size());
        obs.put("distinct", new TreeSet<>(got).size());
        obs.put("pollsToAll", polls);
    }

    /** Row 12: trace-enabled producer and consumer; the trace topic holds Pub and Sub traces for the message. */
    void trace() throws Exception {
        String topic = topic("trace");
        DefaultMQProducer p = producer(new DefaultMQProducer("JSP_trace_" + id, true));
        SendResult sent = p.send(message(topic, "TagA", "trace-0"));
        obs.put("msgId", sent.getMsgId());
        Collector got = new Collector();
        DefaultMQPushConsumer c = consumer(new DefaultMQPushConsumer(group("trace"), true), topic, "*");
        c.registerMessageListener(got);
        start(c);
        await(() -> got.distinct() >= 1);
        obs.put("received", got.bodies.size());
        DefaultMQAdminExt admin = admin();
        TreeSet<String> types = new TreeSet<>();
        TreeSet<String> groups = new TreeSet<>();
        long t0 = System.currentTimeMillis();
        boolean both = await(() -> {
            try {
                QueryResult q = admin.queryMessage("RMQ_SYS_TRACE_TOPIC", sent.getMsgId(), 64, 0, System.currentTimeMillis() + 60000);
                types.clear();
                groups.clear();
                for (MessageExt m : q.getMessageList()) {
                    for (TraceContext t : TraceDataEncoder.decoderFromTraceDataString(body(m))) {
                        if (sent.getMsgId().equals(t.getTraceBeans().get(0).getMsgId())) {
                            types.add(t.getTraceType().name());
                            groups.add(t.getGroupName());
                        }
                    }
                }
            } catch (Exception e) {
                obs.put("lastTraceQueryError", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            return types.contains("Pub") && types.contains("SubAfter");
        });
        obs.put("traceTypes", types);
        obs.put("traceGroups", groups.size());
        obs.put("tracesWithinWait", both);
        obs.put("msToTraces", System.currentTimeMillis() - t0);
    }

    // ---- mixing with the 5.x clients (issue 20) --------------------------------------------

    /**
     * A push consumer (from the first offset) on TOPIC, which a 5.x client sent to, until COUNT
     * distinct bodies arrived; each message as the 4.x client reads it (msgId is UNIQ_KEY).
     */
    void consume5(String topic, int count) throws Exception {
        Map<String, Map<String, Object>> byBody = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = consumer(group("consume5"), topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Map<String, Object> v = new LinkedHashMap<>();
                v.put("msgId", m.getMsgId());
                v.put("uniqKey", m.getProperty("UNIQ_KEY"));
                v.put("keys", m.getKeys());
                v.put("tags", m.getTags());
                v.put("shardingKey", m.getProperty("__SHARDINGKEY"));
                v.put("properties", new TreeMap<>(m.getProperties()));
                v.put("reconsumeTimes", m.getReconsumeTimes());
                v.put("bornTimestamp", m.getBornTimestamp());
                byBody.put(body(m), v);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        start(c);
        obs.put("allWithinWait", await(() -> byBody.size() >= count));
        obs.put("messages", new TreeMap<>(byBody));
    }

    /**
     * Two messages by the 4.x producer to TOPIC, tags TagJ: "from java 4" (keys "kj1 kj2", properties
     * color=blue and a non-ASCII one) and a 6000-byte body the client compresses (over its 4 KiB
     * compressMsgBodyOverHowmuch); the send result of each, by body prefix.
     */
    void produce4(String topic) throws Exception {
        DefaultMQProducer p = producer("produce4");
        Message small = message(topic, "TagJ", "from java 4");
        small.setKeys(java.util.Arrays.asList("kj1", "kj2"));
        small.putUserProperty("color", "blue");
        small.putUserProperty("city", "Z\u00fcrich \u5317\u4eac");
        StringBuilder big = new StringBuilder("big ");
        while (big.length() < 6000) {
            big.append((char) ('a' + big.length() % 26));
        }
        Message large = message(topic, "TagJ", big.toString());
        for (Message m : new Message[] {small, large}) {
            SendResult r = p.send(m);
            Map<String, Object> v = new LinkedHashMap<>();
            v.put("sendStatus", r.getSendStatus().name());
            v.put("msgId", r.getMsgId());
            v.put("uniqKey", m.getProperty("UNIQ_KEY"));
            v.put("bodyLength", m.getBody().length);
            obs.put(new String(m.getBody(), StandardCharsets.UTF_8).substring(0, 3), v);
        }
    }

    /** A JSON writer for maps, collections, strings, numbers, booleans and null. */
    static final class Json {
        static String write(Object o) {
            StringBuilder sb = new StringBuilder();
            write(sb, o);
            return sb.toString();
        }

        static void write(StringBuilder sb, Object o) {
            if (o == null) {
                sb.append("null");
            } else if (o instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                    if (!first) sb.append(',');
                    first = false;
                    string(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    write(sb, e.getValue());
                }
                sb.append('}');
            } else if (o instanceof Collection) {
                sb.append('[');
                boolean first = true;
                for (Object x : (Collection<?>) o) {
                    if (!first) sb.append(',');
                    first = false;
                    write(sb, x);
                }
                sb.append(']');
            } else if (o instanceof Number || o instanceof Boolean) {
                sb.append(o);
            } else {
                string(sb, o.toString());
            }
        }

        static void string(StringBuilder sb, String s) {
            sb.append('"');
            for (char ch : s.toCharArray()) {
                if (ch == '"' || ch == '\\') {
                    sb.append('\\').append(ch);
                } else if (ch < 0x20 || ch > 0x7e) { // ASCII out, whatever stdout's charset
                    sb.append(String.format("\\u%04x", (int) ch));
                } else {
                    sb.append(ch);
                }
            }
            sb.append('"');
        }
    }
}
