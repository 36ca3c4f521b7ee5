import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The official 4.9.7 client subscribing by SQL92. Optionally sends eleven messages first: m0..m9
 * with user properties a=i and b=(i % 3 == 0 ? "x" : "y"), tag TagA for even i and TagB for odd,
 * and "m-none" (tag TagA, no property). Then starts one push consumer per expression (each its own
 * group, from the first offset) and collects what each receives until nothing has arrived for 3 s
 * (or WAIT seconds in all). Prints one JSON line: per expression the bodies received, or the
 * start failure's response code and message. Judging them is the test's business.
 * Args: NAMESRV_ADDR TOPIC SEND(true|false) WAIT_SECONDS EXPRESSION...
 */
public class SqlFilter {
  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }

  public static void main(String[] args) throws Exception {
    String ns = args[0];
    String topic = args[1];
    boolean send = Boolean.parseBoolean(args[2]);
    long waitMs = Long.parseLong(args[3]) * 1000;
    if (send) {
      DefaultMQProducer producer = new DefaultMQProducer("sqlp_" + topic);
      producer.setNamesrvAddr(ns);
      producer.start();
      for (int i = 0; i < 10; i++) {
        Message msg = new Message(topic, i % 2 == 0 ? "TagA" : "TagB", ("m" + i).getBytes("UTF-8"));
        msg.putUserProperty("a", String.valueOf(i));
        msg.putUserProperty("b", i % 3 == 0 ? "x" : "y");
        producer.send(msg);
      }
      producer.send(new Message(topic, "TagA", "m-none".getBytes("UTF-8")));
      producer.shutdown();
    }
    AtomicLong last = new AtomicLong(System.currentTimeMillis());
    List<DefaultMQPushConsumer> consumers = new ArrayList<>();
    List<Set<String>> got = new ArrayList<>();
    List<String> failures = new ArrayList<>();
    for (int k = 4; k < args.length; k++) {
      Set<String> bodies = ConcurrentHashMap.newKeySet();
      got.add(bodies);
      DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("sqlc_" + topic + "_" + k);
      consumer.setNamesrvAddr(ns);
      consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
      consumer.subscribe(topic, MessageSelector.bySql(args[k]));
      consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
        for (MessageExt m : msgs) bodies.add(new String(m.getBody()));
        last.set(System.currentTimeMillis());
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
      });
      try {
        consumer.start();
        consumers.add(consumer);
        failures.add(null);
      } catch (MQClientException e) {
        failures.add("{\"code\":" + e.getResponseCode() + ",\"message\":" + quote(String.valueOf(e.getErrorMessage())) + "}");
        consumer.shutdown();
      }
    }
    long t0 = System.currentTimeMillis();
    last.set(t0);
    while (System.currentTimeMillis() - t0 < waitMs && System.currentTimeMillis() - last.get() < 3000) {
      Thread.sleep(100);
    }
    StringBuilder out = new StringBuilder("{\"results\":[");
    for (int k = 0; k < got.size(); k++) {
      if (k > 0) out.append(',');
      out.append("{\"expression\":").append(quote(args[k + 4])).append(",\"got\":[");
      int n = 0;
      for (String body : new TreeSet<>(got.get(k))) out.append(n++ == 0 ? "" : ",").append(quote(body));
      out.append("],\"startError\":").append(failures.get(k) == null ? "null" : failures.get(k)).append('}');
    }
    System.out.println(out.append("]}"));
    for (DefaultMQPushConsumer consumer : consumers) consumer.shutdown();
  }
}
