import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Retry and dead letters with the official 4.9.7 client, for tests/server/test_java_send_back.py.
 *
 * <p>Usage: RetryDlq NAMESRV RUN_ID. A push consumer (maxReconsumeTimes 1) answers RECONSUME_LATER to
 * everything of RUN_ID_retry; each delivery's reconsumeTimes is recorded until two came, then the
 * group's %DLQ% topic is pulled until the message is there. Meanwhile a message sent with delay level
 * 2 to RUN_ID_delay is consumed by a second push consumer, its delay measured. Prints one JSON line;
 * every wait is bounded.
 */
public class RetryDlq {
    private static final long WAIT_MS = 25_000;

    public static void main(String[] args) throws Exception {
        String ns = args[0];
        String run = args[1];
        String retryTopic = run + "_retry";
        String delayTopic = run + "_delay";
        String group = run + "_cg";
        long t0 = System.currentTimeMillis();

        List<Integer> times = new CopyOnWriteArrayList<>();
        List<String> topics = new CopyOnWriteArrayList<>();
        CountDownLatch twice = new CountDownLatch(2);
        DefaultMQPushConsumer retrying = new DefaultMQPushConsumer(group);
        retrying.setNamesrvAddr(ns);
        retrying.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        retrying.setMaxReconsumeTimes(1);
        // The retry topic exists once the consumer's first heartbeat made it: look its route up again
        // within a second, not the default 30 s (the real broker makes it at the same moment).
        retrying.setPollNameServerInterval(1000);
        retrying.subscribe(retryTopic, "*");
        retrying.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                times.add(m.getReconsumeTimes());
                topics.add(m.getTopic());
                twice.countDown();
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });

        CountDownLatch delayed = new CountDownLatch(1);
        long[] delayedAt = new long[1];
        DefaultMQPushConsumer delayConsumer = new DefaultMQPushConsumer(run + "_dg");
        delayConsumer.setNamesrvAddr(ns);
        delayConsumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        delayConsumer.subscribe(delayTopic, "*");
        delayConsumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            delayedAt[0] = System.currentTimeMillis();
            delayed.countDown();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });

        DefaultMQProducer producer = new DefaultMQProducer(run + "_pg");
        producer.setNamesrvAddr(ns);
        producer.start();
        Message failing = new Message(retryTopic, "TagA", "rk-" + run, "fails".getBytes());
        String retryMsgId = producer.send(failing).getMsgId();
        Message later = new Message(delayTopic, "TagA", "later".getBytes());
        later.setDelayTimeLevel(2);
        long sentDelayed = System.currentTimeMillis();
        producer.send(later);

        retrying.start();
        delayConsumer.start();
        boolean bothDeliveries = twice.await(WAIT_MS, TimeUnit.MILLISECONDS);
        boolean delayArrived = delayed.await(Math.max(1, WAIT_MS - (System.currentTimeMillis() - t0)), TimeUnit.MILLISECONDS);

        // The dead letter, read by a pull consumer of another group.
        DefaultMQPullConsumer reader = new DefaultMQPullConsumer(run + "_dlq_reader");
        reader.setNamesrvAddr(ns);
        reader.start();
        String dlq = "%DLQ%" + group;
        String found = "null";
        long until = System.currentTimeMillis() + 10_000;
        while (bothDeliveries && System.currentTimeMillis() < until && found.equals("null")) {
            try {
                for (MessageQueue mq : reader.fetchSubscribeMessageQueues(dlq)) {
                    PullResult r = reader.pull(mq, "*", 0, 32, 3000);
                    if (r.getPullStatus() == PullStatus.FOUND) {
                        MessageExt m = r.getMsgFoundList().get(0);
                        found = "{\"topic\":\"" + m.getTopic() + "\",\"reconsumeTimes\":" + m.getReconsumeTimes()
                            + ",\"keys\":\"" + m.getKeys() + "\",\"uniqKey\":\"" + m.getProperty("UNIQ_KEY")
                            + "\",\"retryTopic\":\"" + m.getProperty("RETRY_TOPIC") + "\",\"body\":\""
                            + new String(m.getBody()) + "\"}";
                    }
                }
            } catch (Exception e) {
                // no route for the DLQ topic yet: look again
            }
            if (found.equals("null")) {
                Thread.sleep(300);
            }
        }
        List<String> quoted = new ArrayList<>();
        for (String t : topics) {
            quoted.add("\"" + t + "\"");
        }
        System.out.println("{\"retryMsgId\":\"" + retryMsgId + "\",\"reconsumeTimes\":" + times
            + ",\"topics\":" + quoted + ",\"dlq\":" + found + ",\"delayArrived\":" + delayArrived
            + ",\"delayMs\":" + (delayArrived ? delayedAt[0] - sentDelayed : -1)
            + ",\"ms\":" + (System.currentTimeMillis() - t0) + "}");
        reader.shutdown();
        retrying.shutdown();
        delayConsumer.shutdown();
        producer.shutdown();
    }
}
