import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The official 4.9.7 TransactionMQProducer against a server: one transaction committed, one rolled
 * back, one left UNKNOW and committed when the broker checks back. A push consumer collects what is
 * delivered (started after the sends, so the topic's route exists). Prints one JSON line: the bodies received and the check-backs the producer answered.
 * Args: NAMESRV_ADDR TOPIC SECONDS_TO_WAIT.
 */
public class TxScenario {
  public static void main(String[] args) throws Exception {
    String ns = args[0];
    String topic = args[1];
    long waitMs = Long.parseLong(args[2]) * 1000;
    AtomicInteger checks = new AtomicInteger();
    TransactionMQProducer producer = new TransactionMQProducer("txp_" + topic);
    producer.setNamesrvAddr(ns);
    producer.setTransactionListener(new TransactionListener() {
      public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
        switch (msg.getTags()) {
          case "commit": return LocalTransactionState.COMMIT_MESSAGE;
          case "rollback": return LocalTransactionState.ROLLBACK_MESSAGE;
          default: return LocalTransactionState.UNKNOW;
        }
      }
      public LocalTransactionState checkLocalTransaction(MessageExt msg) {
        checks.incrementAndGet();
        return "rollback".equals(msg.getTags())
            ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.COMMIT_MESSAGE;
      }
    });
    producer.start();
    String[] states = {"commit", "rollback", "unknown"};
    StringBuilder sent = new StringBuilder();
    for (String state : states) {
      Message msg = new Message(topic, state, ("tx-" + state).getBytes("UTF-8"));
      String status = producer.sendMessageInTransaction(msg, null).getLocalTransactionState().name();
      sent.append(sent.length() == 0 ? "" : ",").append('"').append(status).append('"');
    }
    Set<String> got = ConcurrentHashMap.newKeySet();
    AtomicInteger deliveries = new AtomicInteger();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("txc_" + topic);
    consumer.setNamesrvAddr(ns);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
      for (MessageExt m : msgs) {
        got.add(new String(m.getBody()));
        deliveries.incrementAndGet();
      }
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    });
    consumer.start();
    long t0 = System.currentTimeMillis();
    while (got.size() < 2 && System.currentTimeMillis() - t0 < waitMs) Thread.sleep(100);
    Thread.sleep(1500); // a rolled-back message, or a second delivery, would arrive in this time
    StringBuilder bodies = new StringBuilder();
    for (String body : new java.util.TreeSet<>(got)) {
      bodies.append(bodies.length() == 0 ? "" : ",").append('"').append(body).append('"');
    }
    System.out.println("{\"sent\":[" + sent + "],\"got\":[" + bodies + "],\"deliveries\":" + deliveries.get()
        + ",\"checks\":" + checks.get() + ",\"ms\":" + (System.currentTimeMillis() - t0) + "}");
    consumer.shutdown();
    producer.shutdown();
  }
}
