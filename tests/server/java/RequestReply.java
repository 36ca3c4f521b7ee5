import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.RequestTimeoutException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The official 4.9.7 REQUEST-REPLY against a server: a requester ({@code DefaultMQProducer.request}) on
 * its own client instance (so its own connection), a push consumer on another that answers each
 * request with {@code MessageUtil.createReplyMessage} sent by a third producer. Three requests to TOPIC
 * must each get the reply made for them (body and CORRELATION_ID); one request to NOREPLY_TOPIC, which
 * nobody consumes, must time out. Prints one JSON line.
 * Args: NAMESRV_ADDR TOPIC NOREPLY_TOPIC.
 */
public class RequestReply {
  static String quote(String s) {
    return '"' + s.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
  }

  public static void main(String[] args) throws Exception {
    String ns = args[0];
    String topic = args[1];
    String noReplyTopic = args[2];
    DefaultMQProducer requester = new DefaultMQProducer("rr_requester");
    requester.setNamesrvAddr(ns);
    requester.setInstanceName("requester");
    requester.start();
    // The topics exist once a message was sent to them (created from TBW102), so the consumer's
    // route lookup finds this one at once.
    requester.send(new Message(topic, "plain", "not a request".getBytes("UTF-8")));
    requester.send(new Message(noReplyTopic, "plain", "not a request".getBytes("UTF-8")));
    // The broker pushes a reply over the connection the requester's heartbeat registered: its
    // first scheduled heartbeat may come after the first reply (request() heartbeats by itself only
    // for a topic it has no route for yet), so heartbeat now, as the broker needs it.
    requester.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();

    DefaultMQProducer replier = new DefaultMQProducer("rr_replier");
    replier.setNamesrvAddr(ns);
    replier.setInstanceName("replier");
    replier.start();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("rr_consumer");
    consumer.setNamesrvAddr(ns);
    consumer.setInstanceName("replier");
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
      for (MessageExt m : msgs) {
        if (m.getProperty(MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT) == null) {
          continue;
        }
        try {
          Message reply = MessageUtil.createReplyMessage(m, ("reply:" + new String(m.getBody(), "UTF-8")).getBytes("UTF-8"));
          replier.send(reply);
        } catch (Exception e) {
          e.printStackTrace();
        }
      }
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    });
    consumer.start();

    List<String> rows = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      Message request = new Message(topic, "req", ("request-" + i).getBytes("UTF-8"));
      long start = System.currentTimeMillis();
      String row;
      try {
        Message reply = requester.request(request, 15000);
        boolean same = request.getProperty(MessageConst.PROPERTY_CORRELATION_ID) != null
            && request.getProperty(MessageConst.PROPERTY_CORRELATION_ID)
                .equals(reply.getProperty(MessageConst.PROPERTY_CORRELATION_ID));
        row = "{\"body\":" + quote(new String(reply.getBody(), "UTF-8")) + ",\"correlationMatches\":" + same
            + ",\"topic\":" + quote(reply.getTopic()) + ",\"ms\":" + (System.currentTimeMillis() - start) + "}";
      } catch (Exception e) {
        row = "{\"error\":" + quote(e.toString()) + "}";
      }
      rows.add(row);
    }
    String timeout;
    long start = System.currentTimeMillis();
    try {
      Message reply = requester.request(new Message(noReplyTopic, "req", "nobody answers".getBytes("UTF-8")), 1500);
      timeout = "{\"unexpectedReply\":" + quote(new String(reply.getBody(), "UTF-8")) + "}";
    } catch (RequestTimeoutException e) {
      timeout = "{\"code\":" + e.getResponseCode() + ",\"ms\":" + (System.currentTimeMillis() - start) + "}";
    } catch (Exception e) {
      timeout = "{\"error\":" + quote(e.toString()) + "}";
    }
    System.out.println("{\"replies\":[" + String.join(",", rows) + "],\"noReply\":" + timeout + "}");
    consumer.shutdown();
    replier.shutdown();
    requester.shutdown();
    System.exit(0);
  }
}
